// The client's pure parts under Node (node --test): frame parsing, dedup, which closes resume.
// The whole client runs against real gateways in tests/integration/gateway (Chromium and Node).
import assert from "node:assert/strict";
import { test } from "node:test";

import { CLOSE_CODES, Deduper, FrameError, isResumable, parseFrame } from "../sparkwire-client.js";

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
