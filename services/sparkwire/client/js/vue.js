/**
 * sparkwire-client/vue — a Vue composable over the client (Vue ≥ 3.3, a peer dependency this entry point alone
 * imports; the main module needs no Vue):
 *
 *   import { useSparkwire } from "sparkwire-client/vue";
 *   const { state, status } = useSparkwire(() => (token.value ? { stream: "orders", token: token.value } : null));
 *   // <li v-for="[key, item] in state" :key="key">{{ key }}: {{ item.data.total }}</li>
 *
 * `options` is an object, a ref or a getter; null makes no client. A change of stream, url, sseUrl, transports
 * or token (or filter) stops the client and makes another (which resumes from what it saved, as a reloaded page does);
 * `after`: a position to start after (client.startAfter) instead of start(). The client stops with the
 * component (its effect scope) or with `stop()`. Returns shallow refs {client, state, cursor, status,
 * terminal}, updated at most once per frame of entries, and `stop`.
 */
import { getCurrentScope, onScopeDispose, shallowRef, toValue, watch } from "vue";

import { createClientStore, SparkwireClient } from "./sparkwire-client.js";

const IDLE_VIEW = Object.freeze({ client: null, state: new Map(), cursor: null, status: null, terminal: null });

/** The options whose change makes another client. */
function identity({ stream, url = null, sseUrl = null, transports = null, token = null, filter = null }) {
  return JSON.stringify([stream, url, sseUrl, transports, token, filter]);
}

export function useSparkwire(options) {
  const refs = Object.fromEntries(Object.keys(IDLE_VIEW).map((name) => [name, shallowRef(IDLE_VIEW[name])]));
  const show = (view) => { for (const name of Object.keys(refs)) refs[name].value = view[name]; };
  let release = () => {};
  const unwatch = watch(() => { const value = toValue(options); return value ? identity(value) : null; }, (key) => {
    release();
    release = () => {};
    if (key === null) { show(IDLE_VIEW); return; }
    const { after, ...rest } = toValue(options);
    const client = new SparkwireClient(rest);
    const store = createClientStore(client);
    const unsubscribe = store.subscribe(() => show(store.getSnapshot()));
    show(store.getSnapshot());
    if (after) client.startAfter(after); else client.start();
    release = () => { unsubscribe(); store.close(); client.stop(); };
  }, { immediate: true });
  const stop = () => { unwatch(); release(); release = () => {}; };
  if (getCurrentScope()) onScopeDispose(stop);
  return { ...refs, stop };
}
