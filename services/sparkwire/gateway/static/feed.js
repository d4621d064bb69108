/**
 * feed.js — the pure logic behind the feed page (feed.html): a stream's newest rows, newest first, each once.
 *
 * A feed (a real-time stream: deliver(mode="realtime"), or any append stream) is read as rows, not as one
 * latest result per key: the page loads the log's last entries (GET /history), then the client delivers every
 * entry after them exactly once (SparkwireClient.startAfter), across reconnects and gateway restarts. `FeedRows`
 * keeps the newest `limit` rows by seq; an entry seen again (by seq or processingId) is not added twice, and an
 * entry of another epoch (the log was rebuilt) starts the rows over. Rows are shown newest first.
 */

/** A payload value as shown in a cell: strings as they are, null as "–", others as JSON. */
export function cellText(value) {
  if (value === null || value === undefined) return "–";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The columns of a feed: the descriptor's schema fields (in order) without the position and id fields. */
export function feedColumns(descriptor, firstPayload = null) {
  const hidden = new Set(["topic", "partition", "offset", "processingId"]);
  const names = descriptor?.schema?.fields?.map((field) => field.name)
    ?? (firstPayload ? Object.keys(firstPayload) : []);
  return names.filter((name) => !hidden.has(name));
}

export class FeedRows {
  constructor(limit = 200) {
    this.limit = limit;
    this.epoch = null;
    this.rows = [];  // {seq, processingId, data, commitMs}, ascending seq
    this.ids = new Set();
    this.added = 0;
    this.repeated = 0;
    this.resets = 0;
  }

  /** A GET /history document's entries: the rows before the client's first live entry. */
  load(doc) {
    this.reset(doc.epoch);
    for (const entry of doc.entries) this.add(doc.epoch, entry);
  }

  reset(epoch) {
    if (this.epoch !== null) this.resets += 1;
    this.epoch = epoch;
    this.rows = [];
    this.ids = new Set();
  }

  /** One entry (the client's onEntry, or a history entry); returns whether it was added. */
  add(epoch, entry) {
    if (epoch !== this.epoch) this.reset(epoch);
    const last = this.rows.at(-1);
    if (this.ids.has(entry.processingId) || (last && entry.seq <= last.seq)) {
      this.repeated += 1;
      return false;
    }
    this.rows.push({ seq: entry.seq, processingId: entry.processingId, data: entry.data, commitMs: entry.commitMs });
    this.ids.add(entry.processingId);
    this.added += 1;
    while (this.rows.length > this.limit) this.ids.delete(this.rows.shift().processingId);
    return true;
  }

  /** The rows newest first. */
  newestFirst() {
    return [...this.rows].reverse();
  }
}
