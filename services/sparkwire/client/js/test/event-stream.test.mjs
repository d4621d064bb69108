// The event-stream parser against the WHATWG HTML standard's rules (§ 9.2.6, "Interpreting an event stream"),
// each rule alone, then every rule with the stream cut into chunks at every possible place.
import assert from "node:assert/strict";
import { test } from "node:test";

import { EventStreamParser } from "../sparkwire-client.js";

/** The events of `chunks` read in order by one parser, and the parser. */
function read(...chunks) {
  const parser = new EventStreamParser();
  return { events: chunks.flatMap((chunk) => parser.push(chunk)), parser };
}
const message = (data, lastEventId = "") => ({ type: "message", data, lastEventId });

test("LF, CRLF and CR each end a line, mixed in one stream", () => {
  assert.deepEqual(read("data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\r\n\n").events,
    [message("a"), message("b"), message("c"), message("d")]);
});

test("a CRLF split between chunks is one line end, not an empty line", () => {
  assert.deepEqual(read("data: a\r", "\ndata: b\r", "\n\r", "\n").events, [message("a\nb")]);
  // A CR at a chunk's end, then an empty chunk, then the LF: still one line end.
  assert.deepEqual(read("data: a\r", "", "\n", "\n").events, [message("a")]);
  // A CR at a chunk's end followed by anything but LF: the next line starts there.
  assert.deepEqual(read("data: a\r", "data: b\r", "\r").events, [message("a\nb")]);
});

test("comment lines are ignored, and a block of comments is no event", () => {
  assert.deepEqual(read(": keep-alive\n\n", ":\n", "data: a\n: inside\ndata: b\n\n").events, [message("a\nb")]);
});

test("data lines are joined with LF; an empty data line adds an empty line", () => {
  assert.deepEqual(read("data: one\ndata: two\ndata\ndata: three\n\n").events, [message("one\ntwo\n\nthree")]);
  assert.deepEqual(read("data\n\n", "data:\n\n").events, [message(""), message("")]);
});

test("one leading space of a value is stripped, no more; no space is needed", () => {
  assert.deepEqual(read("data:a\n\n", "data:  b \n\n", "data:\tc\n\n").events,
    [message("a"), message(" b "), message("\tc")]);
  // Only the first colon separates: the rest belongs to the value.
  assert.deepEqual(read('data: {"a": 1}\n\n').events, [message('{"a": 1}')]);
});

test("event names the type; it applies to one event only, and an empty one is message", () => {
  assert.deepEqual(read("event: close\ndata: x\n\n", "data: y\n\n", "event:\ndata: z\n\n").events,
    [{ type: "close", data: "x", lastEventId: "" }, message("y"), message("z")]);
  // An event with no data dispatches nothing, and its type does not leak into the next event.
  assert.deepEqual(read("event: close\n\n", "data: w\n\n").events, [message("w")]);
});

test("id sets the last event ID, which stays for later events; an empty id resets it; a NUL is ignored", () => {
  const { events, parser } = read("id: 7\ndata: a\n\n", "data: b\n\n", "id: x\0y\ndata: c\n\n", "id\ndata: d\n\n");
  assert.deepEqual(events, [message("a", "7"), message("b", "7"), message("c", "7"), message("d", "")]);
  assert.equal(parser.lastEventId, "");
  // An id in a block with no data still sets the last event ID.
  const idOnly = read("id: 9\n\n", "data: e\n\n");
  assert.deepEqual(idOnly.events, [message("e", "9")]);
});

test("retry takes ASCII digits only; other values and unknown fields are ignored", () => {
  const { events, parser } = read("retry: 2500\n", "retry: 12a\nretry: -1\nretry:\nfoo: bar\nDATA: no\ndata: a\n\n");
  assert.equal(parser.retry, 2500);
  assert.deepEqual(events, [message("a")]);
  assert.equal(new EventStreamParser().retry, null);
});

test("a field without a colon is the field with an empty value", () => {
  const { events, parser } = read("id: 3\n", "data\n", "id\n", "retry\n", "event\n\n");
  assert.deepEqual(events, [message("", "")]);
  assert.equal(parser.retry, null);
});

test("a byte order mark is dropped at the start of the stream only", () => {
  assert.deepEqual(read("\uFEFFdata: a\n\n", "\uFEFFdata: b\n\n").events, [message("a")]);
  assert.deepEqual(read("", "\uFEFFdata: a\n\n").events, [message("a")]);
});

test("an event not closed by an empty line is not dispatched; end() discards it", () => {
  const { events, parser } = read("data: a\n\ndata: b\n", "data: c");
  assert.deepEqual(events, [message("a")]);
  parser.end();
  assert.deepEqual(parser.push("\n\n"), []);
});

test("the same events whatever the chunks: the stream cut at every place, and character by character", () => {
  const stream = "\uFEFF: hello\r\nid: 1\r\nevent: frame\r\ndata: {\"a\":\r\ndata:  1}\r\n\r\n"
    + "data:x\rdata\r\r: c\nretry: 100\nid\nevent:close\ndata: {\"code\": 4409}\n\n";
  const expected = [{ type: "frame", data: '{"a":\n 1}', lastEventId: "1" }, message("x\n", "1"),
    { type: "close", data: '{"code": 4409}', lastEventId: "" }];
  assert.deepEqual(read(stream).events, expected);
  for (let cut = 0; cut <= stream.length; cut += 1) {
    assert.deepEqual(read(stream.slice(0, cut), stream.slice(cut)).events, expected, `cut at ${cut}`);
  }
  for (let a = 0; a <= stream.length; a += 7) {
    for (let b = a; b <= stream.length; b += 3) {
      assert.deepEqual(read(stream.slice(0, a), stream.slice(a, b), stream.slice(b)).events, expected, `cut ${a},${b}`);
    }
  }
  const { events, parser } = read(...stream);
  assert.deepEqual(events, expected);
  assert.equal(parser.retry, 100);
});

test("a long line across many chunks is read whole", () => {
  const long = "x".repeat(100_000);
  const chunks = ["data: ", ...long.match(/.{1,1000}/g), "\n\n"];
  assert.deepEqual(read(...chunks).events, [message(long)]);
});
