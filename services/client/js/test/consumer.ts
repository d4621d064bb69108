// A consumer of the package as TypeScript sees it: `tsc -p test/tsconfig.json` fails if the declarations and
// this use disagree (a renamed option, a wrong callback type).
import { CLOSE_CODES, isResumable, parseFrame, SparkwireClient } from "sparkwire-client";
import type { Entry, SnapshotInfo, StateItem, Status } from "sparkwire-client";

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
