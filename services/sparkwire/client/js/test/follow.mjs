// node --experimental-websocket test/follow.mjs WS_URL STREAM COUNT [TRANSPORTS [SSE_URL]]: follow STREAM with
// the package's client until COUNT entries are applied, then print them as JSON ({applied: [[seq,
// processingId]], stats}). TRANSPORTS: comma-separated (default websocket,sse). Run by
// tests/integration/gateway/test_js_package.py against a real gateway while entries are committed.
// SPARKWIRE_FILTER (JSON, in the environment): follow a filtered subscription (issue 43) with that filter.
import { SparkwireClient } from "sparkwire-client";

const [url, stream, count, transports = "websocket,sse", sseUrl] = process.argv.slice(2);
const applied = [];
const client = new SparkwireClient({
  url, stream, storage: null, transports: transports.split(","), ...(sseUrl ? { sseUrl } : {}),
  ...(process.env.SPARKWIRE_FILTER ? { filter: JSON.parse(process.env.SPARKWIRE_FILTER) } : {}),
  onEntry: (entry) => {
    applied.push([entry.seq, entry.processingId]);
    if (applied.length === Number(count)) {
      client.stop();
      console.log(JSON.stringify({ applied, stats: client.stats() }));
    }
  },
  onStatus: (status) => {
    if (status.state === "failed") { console.error(JSON.stringify(client.terminal)); process.exit(1); }
  },
});
client.start();
setTimeout(() => { console.error(`timed out with ${applied.length} of ${count}`); process.exit(2); }, 60_000).unref();
