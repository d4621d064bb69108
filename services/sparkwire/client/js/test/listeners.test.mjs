// Listeners added and removed after construction (client.on / client.off), beside the constructor's callbacks,
// and the store the React hook and the Vue composable read (createClientStore). A FakeSocket plays the server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createClientStore, SparkwireClient } from "../sparkwire-client.js";
import { FakeSocket, opened, tick } from "./fake-socket.mjs";

function client(options = {}) {
  return new SparkwireClient({ stream: "s", url: "ws://gw/ws", storage: null, WebSocket: FakeSocket, ...options });
}

test("listeners added after construction hear entries, snapshots and statuses after the constructor's callbacks", async () => {
  const heard = [];
  const c = client({ onEntry: (entry) => heard.push(["callback", entry.seq]) });
  c.on("entry", (entry) => heard.push(["listener", entry.seq]));
  c.on("snapshot", (state, info) => heard.push(["snapshot", info.seq, info.reason, state.size]));
  c.on("status", (status) => heard.push(["status", status.state]));
  c.start();
  const socket = await opened();
  socket.welcome(2, { a: { seq: 2, processingId: "p2", data: 1 } });
  socket.entries([3]);
  c.stop();
  assert.deepEqual(heard, [["status", "connecting"], ["status", "open"], ["snapshot", 2, "no_position", 1],
    ["callback", 3], ["listener", 3], ["status", "stopped"]]);
});

test("off removes a listener, as the function on returns does; the others stay", async () => {
  const heard = [];
  const c = client();
  const first = (entry) => heard.push(["first", entry.seq]);
  const second = (entry) => heard.push(["second", entry.seq]);
  c.on("entry", first);
  const removeSecond = c.on("entry", second);
  c.on("entry", first);  // added twice: called once, as addEventListener does
  c.start();
  const socket = await opened();
  socket.welcome();
  socket.entries([1]);
  c.off("entry", first);
  socket.entries([2]);
  removeSecond();
  socket.entries([3]);
  c.off("entry", first);  // no longer a listener: nothing happens
  c.stop();
  assert.deepEqual(heard, [["first", 1], ["second", 1], ["second", 2]]);
  assert.equal(c.cursor.seq, 3, "entries are applied with no listener at all");
});

test("a listener that throws or removes itself does not stop the others or the entries", async () => {
  const heard = [];
  const c = client();
  const once = (entry) => { c.off("entry", once); heard.push(["once", entry.seq]); };
  c.on("entry", () => { throw new Error("the page's bug"); });
  c.on("entry", once);
  c.on("entry", (entry) => heard.push(["always", entry.seq]));
  // The client rethrows a listener's error on a timer of its own (reported, not swallowed): catch it there.
  const [thrown, realSetTimeout] = [[], globalThis.setTimeout];
  globalThis.setTimeout = (fn, ...rest) => realSetTimeout(() => {
    try { fn(); } catch (error) { thrown.push(error.message); }
  }, ...rest);
  c.start();
  const socket = await opened();
  socket.welcome();
  socket.entries([1, 2]);
  await tick();
  globalThis.setTimeout = realSetTimeout;
  c.stop();
  assert.deepEqual(heard, [["once", 1], ["always", 1], ["always", 2]]);
  assert.deepEqual(thrown, ["the page's bug", "the page's bug"], "reported, not swallowed");
  assert.equal(c.cursor.seq, 2);
});

test("on refuses an unknown event and a listener that is not a function", () => {
  const c = client();
  assert.throws(() => c.on("entries", () => {}), /no event 'entries'/);
  assert.throws(() => c.on("entry", null), TypeError);
  assert.throws(() => c.off("nothing", () => {}), TypeError);
});

test("the store's view is the same object until the client changes, and a frame of entries is one change", async () => {
  const c = client();
  const store = createClientStore(c);
  const first = store.getSnapshot();
  assert.equal(store.getSnapshot(), first);
  assert.deepEqual({ ...first, state: [...first.state] },
    { client: c, state: [], cursor: null, status: null, terminal: null });
  let told = 0;
  const unsubscribe = store.subscribe(() => { told += 1; });
  c.start();
  const socket = await opened();
  socket.welcome(1, { k: { seq: 1, processingId: "p1", data: { n: 1 } } });
  await tick();
  const welcomed = store.getSnapshot();
  assert.notEqual(welcomed, first);
  assert.equal(welcomed.status.state, "open");
  assert.deepEqual(welcomed.cursor, { epoch: "e", seq: 1 });
  told = 0;
  socket.entries([2, 3, 4]);
  socket.entries([5], "other");
  await tick();
  assert.equal(told, 1, "told once for two frames in one turn");
  const view = store.getSnapshot();
  assert.deepEqual([...view.state].map(([key, item]) => [key, item.data.n]), [["k", 4], ["other", 5]]);
  assert.equal(view.cursor.seq, 5);
  assert.notEqual(view.state, c.state, "a copy: the next entries do not change a view already rendered");
  socket.entries([6]);
  assert.equal(view.state.get("k").data.n, 4);
  unsubscribe();
  await tick();
  store.close();
  c.stop();
  await tick();
  assert.equal(told, 1, "nothing told after unsubscribe");
  assert.equal(c.listeners.entry.size + c.listeners.snapshot.size + c.listeners.status.size, 0, "close removes its listeners");
});
