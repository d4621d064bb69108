// sparkwire-client/vue under Node: the composable in a Vue effect scope (what a component's setup runs in),
// a FakeSocket as the server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { effectScope, nextTick, ref, watchEffect } from "vue";

import { useSparkwire } from "sparkwire-client/vue";
import { FakeSocket, opened, tick } from "./fake-socket.mjs";

const base = { url: "ws://gw/ws", storage: null, WebSocket: FakeSocket };

test("the composable's refs follow the stream; disposing the scope stops the client", async () => {
  const scope = effectScope();
  const rendered = [];
  const sparkwire = scope.run(() => {
    const refs = useSparkwire({ stream: "s", ...base });
    watchEffect(() => rendered.push([...refs.state.value].map(([key, item]) => `${key}=${item.data.n}`)));
    return refs;
  });
  const socket = await opened();
  assert.equal(socket.sent[0].type, "hello");
  socket.welcome(1, { a: { seq: 1, processingId: "p1", data: { n: 1 } } });
  await tick();
  assert.deepEqual(rendered.at(-1), ["a=1"]);
  assert.equal(sparkwire.status.value.state, "open");
  const before = rendered.length;
  socket.entries([2, 3], "b");
  socket.entries([4], "a");
  await tick();
  assert.deepEqual(rendered.at(-1), ["a=4", "b=3"]);
  assert.equal(rendered.length - before, 1, "one update for the entries of one turn");
  assert.deepEqual(sparkwire.cursor.value, { epoch: "e", seq: 4 });
  assert.equal(sparkwire.client.value.cursor.seq, 4);
  scope.stop();
  assert.equal(socket.closed.code, 1000);
  assert.equal(socket.sent.at(-1).type, "ack", "after a last ack");
});

test("a getter of options: null makes no client, a new stream another one; stop() ends it all", async () => {
  FakeSocket.made.length = 0;
  const stream = ref(null);
  const scope = effectScope();
  const sparkwire = scope.run(() => useSparkwire(() => (stream.value ? { stream: stream.value, ...base } : null)));
  assert.equal(sparkwire.client.value, null);
  stream.value = "one";
  await nextTick();
  const one = await opened();
  assert.match(one.url, /stream=one/);
  stream.value = "two";
  await nextTick();
  const two = await opened();
  assert.match(two.url, /stream=two/);
  assert.equal(one.closed.code, 1000);
  assert.equal(FakeSocket.made.length, 2);
  sparkwire.stop();
  assert.equal(two.closed.code, 1000);
  stream.value = "three";
  await nextTick();
  await tick();
  assert.equal(FakeSocket.made.length, 2, "stopped: options are no longer followed");
  scope.stop();
});

test("`after` starts after a position", async () => {
  const scope = effectScope();
  scope.run(() => useSparkwire({ stream: "s", ...base, after: { epoch: "e", seq: 7 } }));
  const socket = await opened();
  assert.deepEqual(socket.sent[0].cursor, { epoch: "e", seq: 7 });
  scope.stop();
});
