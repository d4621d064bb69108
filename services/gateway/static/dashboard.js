/**
 * dashboard.js — the per-window history behind the live page's charts (index.html), and how it is kept
 * in step with the browser client's saved position. Dependency-free; the charts themselves are uPlot's.
 *
 * The client's `state` holds only the latest result per key, so the page accumulates one point per
 * window itself, keyed by processingId (sha1 of windowEnd and metric, docs/replay-log.md): an entry seen
 * again — a replay after a stale cursor, a snapshot item already drawn — replaces its point instead of
 * adding one. Window results are immutable, so replacing is always safe.
 */

/** Window-result fields (services/aggregator/sink.py PAYLOAD_FIELDS) the charts need, all numbers. */
const NUMERIC_FIELDS = ["windowStart", "windowEnd", "count", "avg", "min", "max"];

/** `data` as a chart point, or null when it is not a window result (other streams' entries). */
export function windowPoint(processingId, data) {
  if (data === null || typeof data !== "object" || typeof data.metricName !== "string") return null;
  if (!NUMERIC_FIELDS.every((name) => Number.isFinite(data[name]))) return null;
  return { processingId, metric: data.metricName, windowStart: data.windowStart, windowEnd: data.windowEnd,
           count: data.count, avg: data.avg, min: data.min, max: data.max };
}

const SAVED_VERSION = 1;
// Saved per point, in this order: short enough that a few thousand windows fit in localStorage.
const SAVED_FIELDS = ["processingId", "windowStart", "windowEnd", "count", "avg", "min", "max"];

export class WindowHistory {
  /** @param {number} maxPointsPerMetric oldest windows are dropped beyond it (localStorage is ~5 MB) */
  constructor(maxPointsPerMetric) {
    this.maxPointsPerMetric = maxPointsPerMetric;
    /** @type {string|null} the log epoch the points come from: seqs and windows of another epoch are gone */
    this.epoch = null;
    /** @type {Map<string, Map<string, object>>} metric -> processingId -> point */
    this.metrics = new Map();
    this.dirty = new Set();  // metrics whose chart must be redrawn
    this.added = 0;
    this.replaced = 0;  // windows that came again and took their own place: proof a repeat drew nothing
    this.dropped = 0;   // windows beyond maxPointsPerMetric
  }

  /** Start over for another epoch's log (a stream reset): its windows may never be committed again. */
  reset(epoch) {
    for (const metric of this.metrics.keys()) this.dirty.add(metric);
    this.metrics.clear();
    this.epoch = epoch;
  }

  /** Adds or replaces the point of one result; returns "added", "replaced" or "ignored". */
  put(processingId, data) {
    const point = windowPoint(processingId, data);
    if (point === null) return "ignored";
    let points = this.metrics.get(point.metric);
    if (!points) this.metrics.set(point.metric, points = new Map());
    const outcome = points.has(processingId) ? "replaced" : "added";
    points.set(processingId, point);
    this[outcome] += 1;
    if (points.size > this.maxPointsPerMetric) this._dropOldest(points);
    this.dirty.add(point.metric);
    return outcome;
  }

  _dropOldest(points) {
    let oldest = null;
    for (const point of points.values()) if (oldest === null || point.windowEnd < oldest.windowEnd) oldest = point;
    points.delete(oldest.processingId);
    this.dropped += 1;
  }

  /** One metric's points in window order. */
  sorted(metric) {
    return [...(this.metrics.get(metric)?.values() ?? [])].sort((a, b) => a.windowEnd - b.windowEnd);
  }

  /** uPlot's columns for one metric: [window end (s), count, avg, min, max]. */
  columns(metric) {
    const points = this.sorted(metric);
    return [points.map((p) => p.windowEnd / 1000), points.map((p) => p.count), points.map((p) => p.avg),
            points.map((p) => p.min), points.map((p) => p.max)];
  }

  /** Every metric's points, plain data (what tests read as window.__sparkwire.series). */
  toObject() {
    return Object.fromEntries([...this.metrics.keys()].map((metric) => [metric, this.sorted(metric)]));
  }

  /**
   * Starts the charts from a `GET /history` document (`fetchHistory`): its entries, and the items (latest
   * result per key) of keys with no entry among them, so every metric gets its card. Returns how many
   * windows it drew. The client then starts after `doc.seq` (SparkwireClient.startAfter): each entry is
   * drawn once, from the history or from the live feed, never both.
   */
  load(doc) {
    this.reset(doc.epoch);
    for (const entry of doc.entries) this.put(entry.processingId, entry.data);
    const firstSeq = doc.entries.length ? doc.entries[0].seq : Infinity;
    for (const item of Object.values(doc.items)) if (item.seq < firstSeq) this.put(item.processingId, item.data);
    const loaded = this.added;
    [this.added, this.replaced] = [0, 0];  // counts of this page's life, not of what it loaded
    return loaded;
  }

  /**
   * After a snapshot at {epoch, seq}, the windows before it that the page never drew, from a `GET /history`
   * document: its entries up to `seq` in that epoch (the client delivers those after it). Returns the
   * lowest seq it covered (Infinity if none): no window is missing when that is at most the page's
   * position before the snapshot + 1.
   */
  backfill(doc, epoch, seq) {
    if (doc.epoch !== epoch || this.epoch !== epoch) return Infinity;
    let lowest = Infinity;
    for (const entry of doc.entries) {
      if (entry.seq > seq) break;
      this.put(entry.processingId, entry.data);
      lowest = Math.min(lowest, entry.seq);
    }
    return lowest;
  }

  /** The saved form, stamped with the client position it was saved at (see pairedStorage). */
  save(cursor) {
    const metrics = {};
    for (const [metric, points] of this.metrics) {
      metrics[metric] = [...points.values()].map((point) => SAVED_FIELDS.map((name) => point[name]));
    }
    return { v: SAVED_VERSION, epoch: this.epoch, throughSeq: cursor?.seq ?? 0, metrics };
  }

  /**
   * Loads `saved` if it holds every window up to `cursor` (the client's restored position, from which
   * the gateway replays): points saved at or after that position leave no hole. Anything else — none
   * saved, another epoch, saved before the cursor — is refused; the page then draws from the client's
   * position on. Returns whether it was loaded.
   */
  restore(saved, cursor) {
    if (!saved || saved.v !== SAVED_VERSION || !cursor || saved.epoch !== cursor.epoch) return false;
    if (!(Number.isSafeInteger(saved.throughSeq) && saved.throughSeq >= cursor.seq)) return false;
    if (saved.metrics === null || typeof saved.metrics !== "object") return false;
    this.reset(saved.epoch);
    for (const [metric, rows] of Object.entries(saved.metrics)) {
      if (!Array.isArray(rows)) continue;
      for (const row of rows) {
        if (!Array.isArray(row) || row.length !== SAVED_FIELDS.length) continue;
        const data = Object.fromEntries(SAVED_FIELDS.map((name, i) => [name, row[i]]));
        if (typeof data.processingId === "string") this.put(data.processingId, { ...data, metricName: metric });
      }
    }
    [this.added, this.replaced] = [0, 0];  // counts of this page's life, not of what it loaded
    return true;
  }
}

/**
 * A Storage for the client that writes the page's history (under `historyKey`) every time the client
 * saves its session, cursor and state, in the same synchronous call: the two can then never disagree
 * about where the page was, which is what makes a reload — or a crashed tab — resume without a hole or
 * a repeat in the charts. History first: if it does not fit, the throw makes the client drop its own
 * save too (its quota handling), and the next page starts from a snapshot rather than from a position
 * the charts do not cover.
 */
export function pairedStorage(base, historyKey, history, cursorOf) {
  return {
    getItem: (key) => base.getItem(key),
    setItem(key, value) {
      base.setItem(historyKey, JSON.stringify(history.save(cursorOf())));
      base.setItem(key, value);
    },
    removeItem(key) {
      base.removeItem(key);
      base.removeItem(historyKey);
    },
  };
}

/** The saved history under `key`, or null if there is none or it is unreadable. */
export function readSaved(base, key) {
  try { return JSON.parse(base?.getItem(key) ?? "null"); } catch { return null; }
}

/**
 * `GET /history?stream=…&last=…` (docs/protocol.md): the last `last` entries of the log (the gateway caps
 * it) and the state they end at, read in one transaction. Resolves to {epoch, seq, firstSeq, entries, items};
 * rejects on an HTTP error or a document that is not one.
 */
export async function fetchHistory(stream, last, token) {
  const query = new URLSearchParams({ stream, last: String(last) });
  const response = await fetch(`/history?${query}`, {
    cache: "no-store", headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (!response.ok) throw new Error(`GET /history: HTTP ${response.status}`);
  const doc = await response.json();
  const count = (v) => Number.isSafeInteger(v) && v >= 0;
  const ok = doc !== null && typeof doc === "object" && typeof doc.epoch === "string" && count(doc.seq)
    && Array.isArray(doc.entries) && doc.items !== null && typeof doc.items === "object"
    && doc.entries.every((e, i) => e !== null && typeof e === "object" && typeof e.processingId === "string"
      && count(e.seq) && e.seq > (i ? doc.entries[i - 1].seq : 0))  // in seq order…
    && (doc.entries.length === 0 || doc.entries.at(-1).seq === doc.seq);  // …ending where the state is
  if (!ok) throw new Error("GET /history: not a history document");
  return doc;
}
