// Issue 43: filtered subscriptions (docs/protocol.md, "Filtered subscriptions"), as client/coverage.py and
// client/view.py apply them. A FakeSocket plays the server, with frames shaped as the spec says: the hello's
// filter, the welcome's view, filtered `entries` frames {after, through, digest, entries} with removals
// {seq, key, removed: true}, position frames (no items), and the closes 4422/4423.
import assert from "node:assert/strict";
import { test } from "node:test";

import { checkFilter, createClientStore, FilterError, FrameError, parseFrame, SparkwireClient } from "../sparkwire-client.js";
import { FakeSocket, opened, tick } from "./fake-socket.mjs";

const VIEW = "00000000000000aa";
const OTHER_VIEW = "00000000000000bb";
const digestOf = (seq) => seq.toString(16).padStart(16, "0");
const FILTER = { region: "eu", count: { ge: 10, lt: 100 } };

function client(options = {}) {
  return new SparkwireClient({ stream: "s", url: "ws://gw/ws", storage: null, WebSocket: FakeSocket, initialDelayMs: 1,
    filter: FILTER, ...options });
}

/** A socket opened after `count` sockets were made (the next connection's). */
async function nextSocket(count) {
  for (;;) {
    const socket = FakeSocket.made[count];
    if (socket?.readyState === 1) return socket;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

function welcome(socket, { recovered = false, reset = recovered ? null : "no_position", view = VIEW, ackEvery = 1000,
  ackIntervalMs = 60000 } = {}) {
  socket.receive({ type: "welcome", session: "s1", epoch: "e", headSeq: 0, recovered, reset, ackEvery, ackIntervalMs,
    ...(view === null ? {} : { view }) });
}

function snapshot(socket, seq = 0, items = {}) {
  socket.receive({ type: "snapshot", epoch: "e", seq, items, more: false, digest: digestOf(seq || 1) });
}

const entry = (seq, key = "k") => ({ seq, processingId: `p${seq}`, key, data: { region: "eu", n: seq }, commitMs: 0,
  digest: digestOf(seq) });
const removal = (seq, key) => ({ seq, key, removed: true });

/** A filtered frame covering (after, through] with `items`; none: a position frame. */
function frame(socket, after, through, items = []) {
  socket.receive({ type: "entries", epoch: "e", after, through, digest: digestOf(through), entries: items });
}

const acks = (socket) => socket.sent.filter((sent) => sent.type === "ack");

test("checkFilter takes the documented form and refuses malformed filters with a FilterError naming the part", () => {
  const spec = { region: "eu", tenant: { in: ["acme", "globex"] }, count: { ge: 10, lt: 100 }, closedAt: { isNull: true },
    $key: { in: ["a", "b"] }, active: true };
  assert.deepEqual(checkFilter(spec), spec);
  assert.notEqual(checkFilter(spec), spec, "a copy");
  assert.deepEqual(checkFilter({}), {});
  for (const [bad, reason] of [
    [null, /filter must be an object/],
    [["region"], /filter must be an object.*got list/],
    ["region=eu", /filter must be an object/],
    [{ region: null }, /filter\.region must not be null \(use isNull\)/],
    [{ region: ["eu", "us"] }, /filter\.region .*got a list \(use "in"\)/],
    [{ region: {} }, /filter\.region names no operator/],
    [{ region: { like: "e%" } }, /filter\.region\.like: unknown operator/],
    [{ region: { in: [] } }, /filter\.region\.in must be a non-empty list/],
    [{ count: { gt: "5" } }, /filter\.count\.gt must be a finite number, got string/],
    [{ count: { gt: Number.NaN } }, /filter\.count\.gt must be a finite number/],
    [{ count: { isNull: "yes" } }, /filter\.count\.isNull must be a boolean/],
    [{ $tenant: "acme" }, /filter\.\$tenant: a name starting with "\$" must be "\$key"/],
    [{ $key: { in: ["a", 1] } }, /filter\.\$key\.in: \$key values must be strings/],
    [{ $key: { gt: 1 } }, /\$key takes eq and in only/],
    [{ region: { eq: { nested: 1 } } }, /filter\.region\.eq must be a string, a number or a boolean, got object/],
    [Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`f${i}`, i])), /17 fields, over the limit of 16/],
    [{ id: { in: Array.from({ length: 257 }, (_, i) => i) } }, /257 values .*over the limit of 256/],
    [{ name: "x".repeat(257) }, /filter\.name is over 256 characters/],
  ]) {
    assert.throws(() => checkFilter(bad), (error) => error instanceof FilterError && reason.test(error.message),
      `${JSON.stringify(bad)?.slice(0, 60)}`);
  }
});

test("a malformed filter fails the constructor before any connection; an oversized hello too", () => {
  const made = FakeSocket.made.length;
  assert.throws(() => client({ filter: { region: { like: "e%" } } }), FilterError);
  assert.throws(() => client({ filter: { tenant: { in: Array.from({ length: 200 }, (_, i) => `tenant-${i}-${"x".repeat(40)}`) } } }),
    (error) => error instanceof FilterError && /over the 8192-byte limit/.test(error.message));
  assert.equal(FakeSocket.made.length, made);
  assert.equal(client({ filter: null }).filter, null, "null: unfiltered");
});

test("filtered frames are parsed as viewEntries with their items, their promises checked", () => {
  const parsed = parseFrame(JSON.stringify({ type: "entries", epoch: "e", after: 4, through: 9, digest: digestOf(9),
    entries: [entry(5), removal(7, "b")] }));
  assert.equal(parsed.type, "viewEntries");
  assert.deepEqual([parsed.after, parsed.through, parsed.digest], [4, 9, digestOf(9)]);
  assert.deepEqual(parsed.items, [entry(5), removal(7, "b")]);
  assert.deepEqual(parseFrame(JSON.stringify({ type: "welcome", session: "s", epoch: "e", headSeq: 1, recovered: true,
    reset: null, ackEvery: 1, ackIntervalMs: 1, view: VIEW })).view, VIEW);
  for (const [doc, reason] of [
    [{ after: 9, through: 9, digest: digestOf(9), entries: [] }, /after must be below through/],
    [{ after: 4, through: 9, digest: digestOf(9), entries: [entry(6), entry(5)] }, /increasing order/],
    [{ after: 4, through: 9, digest: digestOf(9), entries: [entry(10)] }, /increasing order within \(4, 9\]/],
    [{ after: 4, through: 9, digest: "nope", entries: [] }, /digest must be 16 lowercase hex/],
    [{ after: 4, through: 9, entries: [] }, /missing 'digest'/],
    [{ after: 4, through: 9, digest: digestOf(9), entries: [{ seq: 5, key: "b", removed: false }] }, /removed must be true/],
  ]) {
    assert.throws(() => parseFrame(JSON.stringify({ type: "entries", epoch: "e", ...doc })),
      (error) => error instanceof FrameError && reason.test(error.message));
  }
});

test("the hello carries the filter, the cursor the welcome's view and covered position, saved with it", async () => {
  const saved = new Map();
  const storage = { getItem: (k) => saved.get(k) ?? null, setItem: (k, v) => saved.set(k, v), removeItem: (k) => saved.delete(k) };
  const c = client({ storage });
  c.start();
  const socket = await opened();
  assert.deepEqual(socket.sent[0].filter, FILTER);
  assert.equal(socket.sent[0].cursor, undefined);
  welcome(socket, { ackEvery: 1 });
  snapshot(socket, 3, { a: { seq: 2, processingId: "p2", data: {} } });
  assert.deepEqual(c.cursor, { epoch: "e", seq: 3, digest: digestOf(3), view: VIEW });
  frame(socket, 3, 8, [entry(5)]);
  assert.deepEqual(c.cursor, { epoch: "e", seq: 8, digest: digestOf(8), view: VIEW });
  assert.deepEqual(acks(socket).at(-1), { type: "ack", seq: 8, duplicates: 0, gaps: 0, digest: digestOf(8) });
  c.stop();
  // Saved apart from an unfiltered client of the stream, with the view; a reloaded page resumes from it.
  const [[key, text]] = [...saved];
  assert.match(key, /^sparkwire:s\?filter=/);
  assert.equal(JSON.parse(text).view, VIEW);
  const reloaded = client({ storage, filter: { count: { lt: 100, ge: 10 }, region: "eu" } });  // same filter, other order
  assert.deepEqual(reloaded.cursor, { epoch: "e", seq: 8, digest: digestOf(8), view: VIEW });
  assert.deepEqual([...reloaded.state.keys()], ["a", "k"]);
  assert.equal(client({ storage, filter: { region: "us" } }).cursor, null, "another filter: another position");
  assert.equal(client({ storage, filter: null }).cursor, null);
});

test("exactly once across reconnects from mid-way covered positions: overlapping and repeated frames dropped", async () => {
  const applied = [];
  const made = FakeSocket.made.length;
  const c = client({ onEntry: (e) => applied.push(e.seq) });
  c.start();
  let socket = await nextSocket(made);
  welcome(socket);
  snapshot(socket, 0);
  frame(socket, 0, 5, [entry(2), entry(4)]);
  frame(socket, 5, 9, [entry(7)]);
  socket.onclose({ code: 1006, reason: "" });  // the pod died
  socket = await nextSocket(made + 1);
  assert.deepEqual(socket.sent[0].cursor, { epoch: "e", seq: 9, digest: digestOf(9), view: VIEW });
  assert.deepEqual(socket.sent[0].filter, FILTER);
  welcome(socket, { recovered: true });
  // The new pod replays from before the cursor: a frame wholly covered, one overlapping it.
  frame(socket, 3, 9, [entry(4), entry(7)]);
  frame(socket, 5, 12, [entry(7), entry(11)]);
  assert.deepEqual(c.cursor, { epoch: "e", seq: 12, digest: digestOf(12), view: VIEW });
  frame(socket, 12, 14, [entry(13)]);
  socket.onclose({ code: 4409, reason: "stream epoch changed" });
  socket = await nextSocket(made + 2);
  assert.equal(socket.sent[0].cursor.seq, 14);
  welcome(socket, { recovered: true });
  frame(socket, 14, 20, [entry(16)]);
  c.stop();
  assert.deepEqual(applied, [2, 4, 7, 11, 13, 16]);
  assert.equal(c.stats().duplicates, 3, "4 and 7 of the covered frame, 7 of the overlapping one");
  assert.equal(c.stats().gaps, 0);
  assert.deepEqual(acks(socket).at(-1), { type: "ack", seq: 20, duplicates: 3, gaps: 0, digest: digestOf(20) });
});

test("a dropped frame is a gap: counted, what was applied acked, a resume from covered refills it", async () => {
  const applied = [];
  const made = FakeSocket.made.length;
  const c = client({ onEntry: (e) => applied.push(e.seq) });
  c.start();
  let socket = await nextSocket(made);
  welcome(socket);
  snapshot(socket, 0);
  frame(socket, 0, 5, [entry(3)]);
  frame(socket, 8, 12, [entry(10)]);  // (5, 8] was lost, whether it held entries of the view or none
  assert.deepEqual(socket.closed, { code: 1000, reason: "gap: expected seq 6, got 9; resuming" });
  assert.deepEqual(acks(socket), [{ type: "ack", seq: 5, duplicates: 0, gaps: 1, digest: digestOf(5) }]);
  assert.deepEqual(applied, [3]);
  socket = await nextSocket(made + 1);
  assert.deepEqual(socket.sent[0].cursor, { epoch: "e", seq: 5, digest: digestOf(5), view: VIEW });
  welcome(socket, { recovered: true });
  frame(socket, 5, 12, [entry(7), entry(10)]);
  c.stop();
  assert.deepEqual(applied, [3, 7, 10]);
  assert.equal(c.stats().gaps, 1);
});

test("position frames move the cursor and start the ack clock; a repeated one is dropped", async () => {
  const c = client();
  c.start();
  const socket = await opened();
  welcome(socket, { ackIntervalMs: 5 });
  snapshot(socket, 10);
  frame(socket, 10, 40);  // nothing of the view in (10, 40]
  assert.deepEqual(c.cursor, { epoch: "e", seq: 40, digest: digestOf(40), view: VIEW });
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(acks(socket).at(-1), { type: "ack", seq: 40, duplicates: 0, gaps: 0, digest: digestOf(40) });
  frame(socket, 10, 40);
  frame(socket, 40, 41, [entry(41)]);
  c.stop();
  assert.equal(c.cursor.seq, 41);
  assert.deepEqual([c.stats().duplicates, c.stats().gaps], [0, 0]);
  assert.equal(c.state.get("k").seq, 41);
});

test("removals drop a held key once (onRemoval, the removal event, the store); others are no-ops", async () => {
  const removed = [];
  const c = client({ onRemoval: (r) => removed.push(["callback", r.key, r.seq]) });
  c.on("removal", (r) => removed.push(["listener", r.key]));
  const store = createClientStore(c);
  c.start();
  const socket = await opened();
  welcome(socket);
  snapshot(socket, 2, { a: { seq: 1, processingId: "p1", data: {} }, b: { seq: 2, processingId: "p2", data: {} } });
  const before = store.getSnapshot();
  frame(socket, 2, 6, [removal(3, "a"), entry(4, "c"), removal(5, "zz")]);  // zz: never held
  frame(socket, 6, 8, [removal(7, "a")]);  // a second move-out of a key no longer held
  frame(socket, 2, 6, [removal(3, "b")]);  // a repeated frame: never applied
  assert.deepEqual(removed, [["callback", "a", 3], ["listener", "a"]]);
  assert.deepEqual([...c.state.keys()], ["b", "c"]);
  assert.equal(c.stats().removals, 1);
  assert.equal(c.cursor.seq, 8);
  await tick();
  assert.notEqual(store.getSnapshot(), before);
  assert.deepEqual([...store.getSnapshot().state.keys()], ["b", "c"]);
  // Move-in: a later matching revision of the key is an entry again.
  frame(socket, 8, 9, [entry(9, "a")]);
  assert.equal(c.state.get("a").seq, 9);
  store.close();
  c.stop();
});

test("a resume from the session alone (no cursor sent) takes the first frame's after as covered", async () => {
  const applied = [];
  const c = client({ onEntry: (e) => applied.push(e.seq) });
  c.start();
  const socket = await opened();
  assert.equal(socket.sent[0].cursor, undefined);
  welcome(socket, { recovered: true, ackEvery: 1 });  // the server resumed the session's last ack, 40
  frame(socket, 40, 45, [entry(43)]);
  frame(socket, 45, 47, [entry(46)]);
  assert.deepEqual(applied, [43, 46]);
  assert.deepEqual(c.cursor, { epoch: "e", seq: 47, digest: digestOf(47), view: VIEW });
  assert.equal(c.stats().gaps, 0);
  assert.deepEqual(acks(socket).map((a) => a.seq), [45, 47]);
  c.stop();
});

test("a view_changed reset replaces the state and the view; a scoped token's view needs no filter of the client", async () => {
  const c = client({ filter: null });
  c.start();
  const socket = await opened();
  assert.equal("filter" in socket.sent[0], false, "unfiltered: the hello as before");
  welcome(socket, { reset: "view_changed", view: OTHER_VIEW });
  snapshot(socket, 5, { a: { seq: 4, processingId: "p4", data: {} } });
  frame(socket, 5, 6, [entry(6)]);
  assert.deepEqual(c.cursor, { epoch: "e", seq: 6, digest: digestOf(6), view: OTHER_VIEW });
  c.stop();
});

for (const [code, name, reason] of [
  [4422, "invalid_filter", "hello.filter.count must admit some value: gt 5 and lt 3 admit none"],
  [4423, "outside_scope", "hello.filter.tenant names rows outside the token's scope for stream 's'"],
]) {
  test(`${code} stops the client for good with the server's reason (error frame) as its terminal`, async () => {
    const statuses = [];
    const made = FakeSocket.made.length;
    const c = client({ onStatus: (status) => statuses.push(status) });
    c.start();
    const socket = await nextSocket(made);
    socket.receive({ type: "error", code, name, reason });
    socket.onclose({ code, reason: reason.slice(0, 20) });
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(c.terminal, { code, name, reason });
    assert.deepEqual(statuses.at(-1), { state: "failed", code, name, reason });
    assert.equal(FakeSocket.made.length, made + 1, "no reconnect");
  });
}

test("a server that ignores the filter (no view), or mixes frame forms, is a protocol error", async () => {
  let made = FakeSocket.made.length;
  const c = client();
  c.start();
  const socket = await nextSocket(made);
  welcome(socket, { view: null });
  assert.equal(socket.closed.code, 1000);
  assert.deepEqual(c.terminal, { code: 1002, name: "unknown", reason: "the hello asked for a filter but the welcome names no view" });
  made = FakeSocket.made.length;
  const d = client({ filter: null });
  d.start();
  const other = await nextSocket(made);
  welcome(other, { view: VIEW });
  snapshot(other, 1);
  other.entries([2]);
  assert.match(d.terminal.reason, /an unfiltered entries frame on a connection with a view/);
  assert.deepEqual(d.state, new Map(), "nothing of the frame applied");
});
