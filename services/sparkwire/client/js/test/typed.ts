// The client typed by its stream's results: `tsc -p test/tsconfig.json` fails if `T` does not reach entries,
// state, listeners and positions (or reaches where it should not).
import { checkFilter, createClientStore, EventStreamParser, FilterError, SparkwireClient } from "sparkwire-client";
import type { ClientView, Entry, Filter, Removal, StateItem, StreamEvent } from "sparkwire-client";

interface Metric {
  metricName: string;
  count: number;
  avg: number;
}

// T from the type argument ...
const metrics = new SparkwireClient<Metric>({ stream: "metrics", url: "ws://localhost:8000/ws", storage: null,
  onEntry: (entry) => entry.data.count.toFixed(0) });
const average: number | undefined = metrics.state.get("metric-1")?.data.avg;
// ... or inferred from a callback's parameter.
const inferred = new SparkwireClient({ stream: "metrics", onEntry: (entry: Entry<Metric>) => entry.data.metricName });
const inferredItem: StateItem<Metric> | undefined = inferred.state.get("k");

// Listeners added and removed after construction, typed by the event.
const onEntry = (entry: Entry<Metric>) => console.log(entry.key, entry.data.avg);
const removeEntry: () => void = metrics.on("entry", onEntry);
metrics.off("entry", onEntry);
metrics.on("snapshot", (state, info) => state.forEach((item, key) => console.log(key, item.data.count, info.reason)));
metrics.on("status", (status) => status.state === "failed" && console.log(status.code));
removeEntry();
// @ts-expect-error: the data is a Metric, which has no `total`
metrics.on("entry", (entry) => entry.data.total);
// @ts-expect-error: no such event
metrics.on("entries", () => {});
// @ts-expect-error: a status listener takes a Status, not an entry
metrics.on("status", (entry: Entry<Metric>) => entry.seq);

// Positions carry the same T.
metrics.startAfter({ epoch: "e", seq: 3, items: { "metric-1": { seq: 3, processingId: "p", data: { metricName: "metric-1",
  count: 1, avg: 1 } } } });
// @ts-expect-error: an item's data must be a Metric
metrics.startAfter({ epoch: "e", seq: 3, items: { k: { seq: 3, processingId: "p", data: "text" } } });

// Without T, data stays unknown: it must be narrowed before use.
const untyped = new SparkwireClient({ stream: "metrics" });
// @ts-expect-error: unknown data
untyped.on("entry", (entry) => entry.data.count);

// The store a UI reads.
const store = createClientStore(metrics);
const storeView: ClientView<Metric> = store.getSnapshot();
const counts: number[] = [...storeView.state.values()].map((item) => item.data.count);
const unsubscribe: () => void = store.subscribe(() => console.log(store.getSnapshot().cursor?.seq));
unsubscribe();
store.close();

// The event-stream parser.
const parser = new EventStreamParser();
const events: StreamEvent[] = parser.push("data: x\n\n");
const retry: number | null = parser.retry;
console.log(average, inferredItem, counts, events[0]?.type, events[0]?.lastEventId, retry);

// Issue 43: a filtered subscription, its removals and its view, typed.
const euOnly = new SparkwireClient<Metric>({ stream: "metrics", storage: null,
  filter: { region: "eu", count: { ge: 10, lt: 100 }, closedAt: { isNull: true }, $key: { in: ["metric-1"] } },
  onRemoval: (removal: Removal) => console.log(removal.key, removal.seq, removal.removed) });
const removedKey: () => void = euOnly.on("removal", (removal) => removal.key.length);
removedKey();
const view: string | undefined = euOnly.cursor?.view;
const checked: Filter = checkFilter({ tenant: "acme" });
euOnly.startAfter({ epoch: "e", seq: 3, digest: "0123456789abcdef", view: "00000000000000aa" });
console.log(view, checked, euOnly.filter, euOnly.view, euOnly.stats().removals, new FilterError("x").message);
// @ts-expect-error: a condition's comparison takes a number
new SparkwireClient({ stream: "metrics", filter: { count: { gt: "5" } } });
// @ts-expect-error: no such operator
new SparkwireClient({ stream: "metrics", filter: { count: { like: "5%" } } });
// @ts-expect-error: null is no scalar (use isNull)
new SparkwireClient({ stream: "metrics", filter: { region: null } });
// @ts-expect-error: a removal carries no data
euOnly.on("removal", (removal) => removal.data);
