// A consumer of the package as TypeScript sees it: `tsc -p test/tsconfig.json` fails if the declarations and
// this use disagree (a renamed option, a wrong callback type).
import { CLOSE_CODES, isResumable, parseFrame, SparkwireClient, SseSocket } from "sparkwire-client";
import type { Entry, SnapshotInfo, SocketLike, StateItem, Status, Transport } from "sparkwire-client";

const drawn = new Map<string, unknown>();
const client = new SparkwireClient({
  stream: "metrics",
  url: "ws://localhost:8000/ws",
  storage: null,
  onEntry: (entry: Entry) => drawn.set(entry.key, entry.data),
  onSnapshot: (state: Map<string, StateItem>, info: SnapshotInfo) => {
    drawn.clear();
    for (const [key, item] of state) drawn.set(key, item.data);
    console.log(info.reason, info.seq);
  },
  onStatus: (status: Status) => console.log(status.state, status.code ?? ""),
});
const started: boolean = client.startAfter({ epoch: "e", seq: 0 });
const position: number | undefined = client.cursor?.seq;
const resumable: boolean = isResumable(4408) && CLOSE_CODES[4408][1];
const frame = parseFrame("{}");
if (frame.type === "entries") frame.entries.forEach((entry) => entry.processingId.length);
console.log(started, position, resumable, client.stats().duplicates);
client.stop();

// @ts-expect-error: a stream is required
new SparkwireClient({ url: "ws://x" });

// Server-Sent Events: a transport list, and the socket itself.
const fallback = new SparkwireClient({ stream: "metrics", url: "ws://localhost:8000/ws", transports: ["websocket", "sse"],
  sseUrl: "http://localhost:8000/sse" });
const transport: Transport = fallback.stats().transport;
const sse: SocketLike = new SseSocket("http://localhost:8000/sse?stream=metrics", { affinity: "a" });
console.log(transport, sse.readyState);
// @ts-expect-error: only websocket and sse
new SparkwireClient({ stream: "metrics", transports: ["polling"] });

// A filtered frame as parseFrame gives it (a filtered `entries` frame): entries and removals.
const filtered = parseFrame("{}");
if (filtered.type === "viewEntries") {
  filtered.items.forEach((item) => ("removed" in item ? item.key : item.processingId).length);
  console.log(filtered.after, filtered.through, filtered.digest);
}
