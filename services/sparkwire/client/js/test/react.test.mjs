// sparkwire-client/react under Node: the hook rendered with react-test-renderer, a FakeSocket as the server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createElement, StrictMode } from "react";
import { act, create } from "react-test-renderer";

import { useSparkwire } from "sparkwire-client/react";
import { FakeSocket, opened } from "./fake-socket.mjs";

globalThis.IS_REACT_ACT_ENVIRONMENT = true;
// React 19 deprecates the test renderer (for React Native's testing library) but it renders hooks without a DOM.
const consoleError = console.error;
console.error = (...args) => { if (!String(args[0]).includes("react-test-renderer is deprecated")) consoleError(...args); };

const base = { url: "ws://gw/ws", storage: null, WebSocket: FakeSocket };

/** Renders the hook with `props.options`; `views` gets every view rendered. */
function Probe({ options, views }) {
  const view = useSparkwire(options);
  views.push(view);
  return createElement("ul", null, [...view.state].map(([key, item]) => createElement("li", { key }, `${key}=${item.data.n}`)));
}

const items = (root) => root.root.findAllByType("li").map((li) => li.children.join(""));

test("the hook follows the stream while mounted: entries re-render it, unmounting stops the client", async () => {
  const views = [];
  let root;
  await act(async () => { root = create(createElement(Probe, { options: { stream: "s", ...base }, views })); });
  const socket = await opened();
  assert.equal(socket.sent[0].type, "hello");
  await act(async () => { socket.welcome(1, { a: { seq: 1, processingId: "p1", data: { n: 1 } } }); });
  assert.deepEqual(items(root), ["a=1"]);
  const rendersBefore = views.length;
  await act(async () => { socket.entries([2, 3, 4], "b"); socket.entries([5], "a"); });
  assert.deepEqual(items(root), ["a=5", "b=4"]);
  assert.equal(views.length - rendersBefore, 1, "one render for the entries of one turn");
  const view = views.at(-1);
  assert.equal(view.status.state, "open");
  assert.deepEqual(view.cursor, { epoch: "e", seq: 5 });
  assert.equal(view.client.stats().transport, "websocket");
  await act(async () => { root.unmount(); });
  assert.equal(socket.closed.code, 1000, "stopped with the component");
  assert.equal(socket.sent.at(-1).type, "ack", "after a last ack");
});

test("null options make no client; a new stream makes another client and stops the last one", async () => {
  FakeSocket.made.length = 0;
  const views = [];
  let root;
  await act(async () => { root = create(createElement(Probe, { options: null, views })); });
  assert.equal(FakeSocket.made.length, 0);
  assert.equal(views.at(-1).client, null);
  await act(async () => { root.update(createElement(Probe, { options: { stream: "one", ...base }, views })); });
  const one = await opened();
  assert.match(one.url, /stream=one/);
  // A new options object with the same stream (every render makes one) keeps the client.
  await act(async () => { root.update(createElement(Probe, { options: { stream: "one", ...base }, views })); });
  assert.equal(FakeSocket.made.length, 1);
  await act(async () => { root.update(createElement(Probe, { options: { stream: "two", ...base }, views })); });
  const two = await opened();
  assert.match(two.url, /stream=two/);
  assert.equal(one.closed.code, 1000);
  assert.notEqual(views.at(-1).client, null);
  await act(async () => { root.update(createElement(Probe, { options: null, views })); });
  assert.equal(two.closed.code, 1000);
  assert.equal(views.at(-1).client, null);
  assert.equal(views.at(-1).state.size, 0);
  await act(async () => { root.unmount(); });
});

test("the latest render's callbacks are called, and `after` starts after a position", async () => {
  const heard = [];
  const views = [];
  const options = (name) => ({ stream: "s", ...base, onEntry: (entry) => heard.push([name, entry.seq]),
    after: { epoch: "e", seq: 7 } });
  let root;
  await act(async () => { root = create(createElement(Probe, { options: options("first"), views })); });
  const socket = await opened();
  assert.deepEqual(socket.sent[0].cursor, { epoch: "e", seq: 7 });
  await act(async () => {
    socket.receive({ type: "welcome", session: "s1", epoch: "e", headSeq: 7, recovered: true, reset: null,
      ackEvery: 1000, ackIntervalMs: 60000 });
    socket.entries([8]);
  });
  await act(async () => { root.update(createElement(Probe, { options: options("second"), views })); });
  await act(async () => { socket.entries([9]); });
  assert.deepEqual(heard, [["first", 8], ["second", 9]]);
  assert.equal(FakeSocket.made.at(-1), socket, "the same client throughout");
  await act(async () => { root.unmount(); });
});

test("under StrictMode's double mount one client is left running", async () => {
  FakeSocket.made.length = 0;
  const views = [];
  let root;
  await act(async () => {
    root = create(createElement(StrictMode, null, createElement(Probe, { options: { stream: "s", ...base }, views })));
  });
  const socket = await opened();
  assert.deepEqual(FakeSocket.made.filter((made) => made.closed === null), [socket]);
  await act(async () => { socket.welcome(1, { a: { seq: 1, processingId: "p1", data: { n: 1 } } }); });
  assert.deepEqual(items(root), ["a=1"]);
  await act(async () => { root.unmount(); });
  assert.equal(socket.closed.code, 1000);
});

test("issue 43: a filtered hook drops a card on a removal; a new filter makes another client, the same one keeps it", async () => {
  FakeSocket.made.length = 0;
  const views = [];
  const removed = [];
  const options = (tenant) => ({ stream: "s", ...base, filter: { tenant }, onRemoval: (r) => removed.push(r.key) });
  let root;
  await act(async () => { root = create(createElement(Probe, { options: options("acme"), views })); });
  const first = await opened();
  assert.deepEqual(first.sent[0].filter, { tenant: "acme" });
  await act(async () => {
    first.receive({ type: "welcome", session: "s1", epoch: "e", headSeq: 2, recovered: false, reset: "no_position",
      ackEvery: 1000, ackIntervalMs: 60000, view: "00000000000000aa" });
    first.receive({ type: "snapshot", epoch: "e", seq: 2, more: false, items: {
      a: { seq: 1, processingId: "p1", data: { n: 1 } }, b: { seq: 2, processingId: "p2", data: { n: 2 } } } });
  });
  assert.deepEqual(items(root), ["a=1", "b=2"]);
  await act(async () => {
    first.receive({ type: "entries", epoch: "e", after: 2, through: 4, digest: "0000000000000004",
      entries: [{ seq: 3, key: "a", removed: true }] });
  });
  assert.deepEqual(items(root), ["b=2"]);
  assert.deepEqual(removed, ["a"]);
  assert.equal(views.at(-1).cursor.view, "00000000000000aa");
  await act(async () => { root.update(createElement(Probe, { options: options("acme"), views })); });
  assert.equal(FakeSocket.made.length, 1, "the same filter keeps the client");
  await act(async () => { root.update(createElement(Probe, { options: options("globex"), views })); });
  const second = await opened();
  assert.equal(FakeSocket.made.length, 2);
  assert.equal(first.closed.code, 1000);
  assert.deepEqual(second.sent[0].filter, { tenant: "globex" });
  await act(async () => { root.unmount(); });
});
