// The client's pure parts under Node (node --test): frame parsing, dedup, which closes resume.
// The whole client runs against real gateways in tests/integration/gateway (Chromium and Node).
import assert from "node:assert/strict";
import { test } from "node:test";

import { CLOSE_CODES, Deduper, FrameError, isResumable, parseFrame, SparkwireClient } from "../sparkwire-client.js";

test("a welcome is read with every field", () => {
  const welcome = parseFrame(JSON.stringify({ type: "welcome", v: 1, session: "s", epoch: "e", headSeq: 7,
    recovered: true, reset: null, ackEvery: 100, ackIntervalMs: 1000 }));
  assert.deepEqual(welcome, { type: "welcome", session: "s", epoch: "e", headSeq: 7, recovered: true, reset: null,
    ackEvery: 100, ackIntervalMs: 1000 });
});

test("malformed frames are refused with the reason, never half applied", () => {
  for (const [text, reason] of [
    ["not json", /not JSON/],
    ["[]", /must be an object/],
    [JSON.stringify({ type: "entries", epoch: "e", entries: [{ seq: -1, processingId: "p", key: "k", data: 1,
      commitMs: 0 }] }), /seq must be a non-negative integer/],
    [JSON.stringify({ type: "entries", epoch: "e", entries: [{ seq: 1, key: "k", data: 1, commitMs: 0 }] }),
      /missing 'processingId'/],
    [JSON.stringify({ type: "welcome", v: 1, session: "s", epoch: "e", headSeq: 0, recovered: false, reset: null,
      ackEvery: 0, ackIntervalMs: 1 }), /ackEvery must be at least 1/],
  ]) {
    assert.throws(() => parseFrame(text), (error) => error instanceof FrameError && reason.test(error.message));
  }
});

test("a newer server's frame type is unknown, not an error", () => {
  assert.deepEqual(parseFrame(JSON.stringify({ type: "presence", who: [] })), { type: "unknown", name: "presence" });
});

test("the deduper drops a repeat and forgets the oldest beyond its capacity", () => {
  const deduper = new Deduper(2);
  // a repeat refreshes its place: "a" outlives "b", which is forgotten when "c" comes
  assert.deepEqual(["a", "b", "a", "c", "a", "b"].map((id) => deduper.isDuplicate(id)),
    [false, false, true, false, true, false]);
  assert.equal(deduper.duplicates, 2);
});

test("resumable closes follow the table; drops and unknown codes resume", () => {
  for (const [code, [, resumable]] of Object.entries(CLOSE_CODES)) assert.equal(isResumable(Number(code)), resumable);
  assert.equal(isResumable(1006), true);
  assert.equal(isResumable(4999), true);
  assert.equal(isResumable(4401), false);
});

// Issue 47: the digest of the entry at the cursor's seq goes back with the cursor and acks (docs/protocol.md,
// "Continuity"). Driven through the client's frame handling with a bare connection record, no socket.
const DIGEST_A = "0123456789abcdef";
const DIGEST_B = "fedcba9876543210";
const frame = (doc) => parseFrame(JSON.stringify(doc));

function connection() {
  return { welcome: null, snapshotParts: [], snapshotExpected: false, snapshotReason: null, ackedSeq: null,
    unacked: 0, unackedSince: null };
}

test("entries and snapshots are read with their digest, and refused with a malformed one", () => {
  const entries = frame({ type: "entries", epoch: "e", entries: [{ seq: 1, processingId: "p", key: "k", data: 1,
    commitMs: 0, digest: DIGEST_A }] });
  assert.equal(entries.entries[0].digest, DIGEST_A);
  const old = frame({ type: "entries", epoch: "e", entries: [{ seq: 1, processingId: "p", key: "k", data: 1,
    commitMs: 0 }] });
  assert.equal("digest" in old.entries[0], false);  // a server older than digests
  assert.equal(frame({ type: "snapshot", epoch: "e", seq: 3, digest: DIGEST_B, items: {}, more: false }).digest,
    DIGEST_B);
  assert.throws(() => frame({ type: "entries", epoch: "e", entries: [{ seq: 1, processingId: "p", key: "k",
    data: 1, commitMs: 0, digest: "XYZ" }] }), (error) => error instanceof FrameError && /digest/.test(error.message));
});

test("the cursor, the hello and acks carry the digest of the entry at their seq", () => {
  const client = new SparkwireClient({ url: "ws://127.0.0.1:1/ws", stream: "s", storage: null });
  const conn = connection();
  client._handle(conn, frame({ type: "welcome", session: "s1", epoch: "e", headSeq: 3, recovered: false,
    reset: "no_position", ackEvery: 2, ackIntervalMs: 1000 }));
  client._handle(conn, frame({ type: "snapshot", epoch: "e", seq: 3, digest: DIGEST_A, items: {}, more: false }));
  assert.deepEqual(client.cursor, { epoch: "e", seq: 3, digest: DIGEST_A });
  const reaction = client._handle(conn, frame({ type: "entries", epoch: "e", entries: [
    { seq: 4, processingId: "p4", key: "k", data: 4, commitMs: 0, digest: DIGEST_A },
    { seq: 5, processingId: "p5", key: "k", data: 5, commitMs: 0, digest: DIGEST_B }] }));
  assert.deepEqual(reaction.send.map((text) => JSON.parse(text)),
    [{ type: "ack", seq: 5, duplicates: 0, gaps: 0, digest: DIGEST_B }]);
  assert.deepEqual(JSON.parse(client._hello()).cursor, { epoch: "e", seq: 5, digest: DIGEST_B });
  // From a server older than digests: the cursor and acks say nothing of one, as before.
  client._handle(conn, frame({ type: "entries", epoch: "e", entries: [
    { seq: 6, processingId: "p6", key: "k", data: 6, commitMs: 0 }] }));
  assert.deepEqual(client.cursor, { epoch: "e", seq: 6 });
});

test("an acks frame replaces the welcome's ack policy on that connection", () => {
  assert.deepEqual(parseFrame(JSON.stringify({ type: "acks", ackEvery: 5, ackIntervalMs: 4000 })),
    { type: "acks", ackEvery: 5, ackIntervalMs: 4000 });
  assert.throws(() => parseFrame(JSON.stringify({ type: "acks", ackEvery: 0, ackIntervalMs: 1 })),
    (error) => error instanceof FrameError && /acks.ackEvery must be at least 1/.test(error.message));
  const client = new SparkwireClient({ url: "ws://127.0.0.1:1/ws", stream: "s", storage: null });
  const conn = connection();
  client._handle(conn, frame({ type: "welcome", session: "s1", epoch: "e", headSeq: 0, recovered: false,
    reset: "no_position", ackEvery: 2, ackIntervalMs: 1000 }));
  client._handle(conn, frame({ type: "snapshot", epoch: "e", seq: 0, items: {}, more: false }));
  const entry = (seq) => ({ seq, processingId: `p${seq}`, key: "k", data: seq, commitMs: 0 });
  // Two entries were an ack under the welcome's policy; after the pod asked for one every 3, they are not.
  client._handle(conn, frame({ type: "acks", ackEvery: 3, ackIntervalMs: 60000 }));
  const first = client._handle(conn, frame({ type: "entries", epoch: "e", entries: [entry(1), entry(2)] }));
  assert.deepEqual(first.send ?? [], []);
  assert.ok(client._msUntilAck(conn) > 50000);  // due by the new interval, not the welcome's second
  const third = client._handle(conn, frame({ type: "entries", epoch: "e", entries: [entry(3)] }));
  assert.deepEqual(third.send.map((text) => JSON.parse(text)), [{ type: "ack", seq: 3, duplicates: 0, gaps: 0 }]);
});
