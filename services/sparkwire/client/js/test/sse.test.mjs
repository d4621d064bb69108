// The SSE socket alone under Node (node --test), with a scripted fetch: events read across chunk boundaries,
// the close event as the close code, client frames posted one request at a time in order, a lost
// connection (404) as a drop. The whole client over SSE runs against real gateways in tests/integration.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SseSocket } from "../sparkwire-client.js";

/** A fetch whose POST /sse answers `chunks` as the event stream; frames posts are recorded and answered. */
function scripted(chunks, framesStatus = 204) {
  const posts = [];
  const fetch = async (url, init) => {
    if (new URL(url).pathname === "/sse") {
      const body = new ReadableStream({
        async start(controller) {
          for (const chunk of chunks) { await new Promise((r) => setTimeout(r, 5)); controller.enqueue(new TextEncoder().encode(chunk)); }
          controller.close();
        },
      });
      return new Response(body, { status: 200, headers: { "x-sparkwire-connection": "c1" } });
    }
    posts.push({ url, body: init.body, affinity: init.headers["x-sparkwire-affinity"] });
    await new Promise((r) => setTimeout(r, 10));
    return new Response(null, { status: framesStatus });
  };
  return { fetch, posts };
}

function run(socket) {
  return new Promise((resolve) => {
    const messages = [];
    socket.onmessage = (event) => messages.push(JSON.parse(event.data));
    socket.onclose = (event) => resolve({ messages, close: event });
  });
}

test("events split across chunks are read whole, and the close event is the close code", async () => {
  const { fetch } = scripted(['data: {"type":"ping","t":1}\n\nda', 'ta: {"type":"ping",', '"t":2}\n\n',
    'event: close\ndata: {"code":4409,"reason":"stream epoch changed"}\n\n']);
  const socket = new SseSocket("http://gw/sse?stream=s", { fetch });
  const ended = run(socket);
  socket.send('{"type":"hello","v":1}');
  const { messages, close } = await ended;
  assert.deepEqual(messages, [{ type: "ping", t: 1 }, { type: "ping", t: 2 }]);
  assert.deepEqual(close, { code: 4409, reason: "stream epoch changed" });
  assert.equal(socket.readyState, 3);
});

test("an answer that ends without a close event is a drop (1006)", async () => {
  const { fetch } = scripted(['data: {"type":"ping","t":1}\n\n']);
  const socket = new SseSocket("http://gw/sse?stream=s", { fetch });
  const ended = run(socket);
  socket.send("{}");
  assert.equal((await ended).close.code, 1006);
});

test("frames sent are posted in order, one request at a time, to the named connection", async () => {
  const { fetch, posts } = scripted(['data: {"type":"ping","t":1}\n\n', ...Array(20).fill(": keep\n\n")]);
  const socket = new SseSocket("http://gw/sse?stream=s", { fetch, affinity: "a1" });
  socket.send("hello");
  for (let seq = 1; seq <= 5; seq += 1) socket.send(`ack ${seq}`);
  await new Promise((r) => setTimeout(r, 80));
  socket.close();
  assert.ok(posts.length >= 1 && posts.length < 5, `batched: ${posts.length} requests`);
  assert.deepEqual(posts.flatMap((p) => p.body.split("\n")), ["ack 1", "ack 2", "ack 3", "ack 4", "ack 5"]);
  for (const post of posts) {
    assert.equal(post.url, "http://gw/sse/frames?connection=c1");
    assert.equal(post.affinity, "a1");
  }
});

test("frames the pod no longer knows of (404) end the socket as a drop, to resume elsewhere", async () => {
  const { fetch } = scripted(Array(20).fill(": keep\n\n"), 404);
  const socket = new SseSocket("http://gw/sse?stream=s", { fetch });
  const ended = run(socket);
  socket.send("hello");
  socket.send("ack 1");
  const { close } = await ended;
  assert.equal(close.code, 1006);
  assert.match(close.reason, /gone from its pod/);
});
