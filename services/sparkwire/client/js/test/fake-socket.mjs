// A WebSocket stand-in for the client under node --test: it opens on the next turn, records what the client
// sends, and delivers the frames a test gives it. Not a test file itself (node --test runs *.test.mjs).

export class FakeSocket {
  /** Every socket made, in order. */
  static made = [];

  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    this.closed = null;
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    FakeSocket.made.push(this);
    setTimeout(() => { this.readyState = 1; this.onopen?.({}); });
  }

  send(text) { this.sent.push(JSON.parse(text)); }

  close(code, reason) { this.readyState = 3; this.closed = { code, reason }; }

  /** The server sends `frame`. */
  receive(frame) { this.onmessage?.({ data: JSON.stringify(frame) }); }

  /** The server welcomes the client with a snapshot of `items` at `seq`. */
  welcome(seq = 0, items = {}) {
    this.receive({ type: "welcome", session: "s1", epoch: "e", headSeq: seq, recovered: false, reset: "no_position",
      ackEvery: 1000, ackIntervalMs: 60000 });
    this.receive({ type: "snapshot", epoch: "e", seq, items, more: false });
  }

  /** The server sends entries `seqs` of key `key`, data {n: seq}. */
  entries(seqs, key = "k") {
    this.receive({ type: "entries", epoch: "e", entries: seqs.map((seq) => ({ seq, processingId: `p${seq}`, key,
      data: { n: seq }, commitMs: 0 })) });
  }
}

/** The socket made last, once it is open. */
export async function opened() {
  for (;;) {
    const socket = FakeSocket.made.at(-1);
    if (socket?.readyState === 1) return socket;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

export const tick = () => new Promise((resolve) => setTimeout(resolve, 0));
