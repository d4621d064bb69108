/**
 * sparkwire-client/react — a React hook over the client (React ≥ 18, a peer dependency this entry point alone
 * imports; the main module needs no React):
 *
 *   import { useSparkwire } from "sparkwire-client/react";
 *   function Orders({ token }) {
 *     const { state, status } = useSparkwire(token ? { stream: "orders", token } : null);
 *     return <ul>{[...state].map(([key, item]) => <li key={key}>{key}: {item.data.total}</li>)}</ul>;
 *   }
 *
 * The client is made in an effect (so StrictMode's double mount makes and stops one, then makes another) and
 * stopped when the component unmounts or `options` is null. A change of stream, url, sseUrl, transports or
 * token (or filter) stops it and makes another (which resumes from what it saved, as a reloaded page does); the other
 * options are read when it is made, except the callbacks, where the latest render's are called (onRemoval too). `after`:
 * a position to start after (client.startAfter) instead of start(). Returns the store's view
 * {client, state, cursor, status, terminal}: a re-render per change, at most one per frame of entries.
 */
import { useEffect, useRef, useState, useSyncExternalStore } from "react";

import { createClientStore, SparkwireClient } from "./sparkwire-client.js";

const IDLE_VIEW = Object.freeze({ client: null, state: new Map(), cursor: null, status: null, terminal: null });
const IDLE = { subscribe: () => () => {}, getSnapshot: () => IDLE_VIEW };

/** The options whose change makes another client. */
function identity({ stream, url = null, sseUrl = null, transports = null, token = null, filter = null }) {
  return JSON.stringify([stream, url, sseUrl, transports, token, filter]);
}

export function useSparkwire(options) {
  const latest = useRef(options);
  useEffect(() => { latest.current = options; });
  const key = options ? identity(options) : null;
  const [store, setStore] = useState(null);
  useEffect(() => {
    if (key === null) return undefined;
    const { after, onEntry, onSnapshot, onStatus, onRemoval, refreshToken, ...rest } = latest.current;
    const client = new SparkwireClient({ ...rest,
      ...(onEntry && { onEntry: (entry) => latest.current?.onEntry?.(entry) }),
      ...(onSnapshot && { onSnapshot: (state, info) => latest.current?.onSnapshot?.(state, info) }),
      ...(onStatus && { onStatus: (status) => latest.current?.onStatus?.(status) }),
      ...(onRemoval && { onRemoval: (removal) => latest.current?.onRemoval?.(removal) }),
      ...(refreshToken && { refreshToken: () => (latest.current?.refreshToken ?? refreshToken)() }) });
    const made = createClientStore(client);
    setStore(made);
    if (after) client.startAfter(after); else client.start();
    return () => {
      made.close();
      client.stop();
      setStore((current) => (current === made ? null : current));
    };
  }, [key]);
  const current = store ?? IDLE;
  return useSyncExternalStore(current.subscribe, current.getSnapshot, current.getSnapshot);
}
