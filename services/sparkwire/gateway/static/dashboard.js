/**
 * dashboard.js — the pure logic behind the live page (index.html): how a stream's results are drawn, from
 * its descriptor (GET /descriptor, docs/protocol.md), and the per-result history behind the charts, kept in
 * step with the browser client's saved position. Dependency-free; the charts themselves are uPlot's.
 *
 * Layout. A stream's descriptor names its event time (the x axis), its window columns (or a window struct's
 * fields, as paths: "window.start", found in the payload's nested object by `fieldValue`), its value fields,
 * their units, its mode and its schema; `layoutFromDescriptor` turns that into what the page draws: one card
 * per result key, a chart series per numeric value field (integer fields without a unit as bars on their own
 * scale, the rest as lines, a min/max pair as a band: the metrics stream's look; each line field on a chart of
 * its own, `chartPanels`), non-numeric value fields in a small table. Without a descriptor (404: a writer older than descriptors), `inferLayout` guesses from the
 * first payload: a metrics window result gets `METRICS_LAYOUT` (what the metrics job's descriptor says);
 * anything else gets its numeric payload fields as value fields and the first of windowEnd / eventTime /
 * timestamp / time / ts as its event time.
 *
 * Payload values (services/sparkwire/spark/encoding.py): timestamps are ISO-8601 strings ("…T10:00:10.000000Z") or, in
 * the metrics stream, epoch-ms numbers (`parseTime`); decimals are strings of exact digits, parsed to numbers
 * only to be drawn (`parseNumber`), shown as their exact digits; "NaN" / "±Infinity" draw nothing.
 *
 * One point per result. The client's `state` holds only the latest result per key, so the page accumulates
 * the points itself, keyed by the result's id (the payload's processingId: sha1 of its window and key): an
 * entry seen again — a replay after a stale cursor, a snapshot item already drawn — replaces its point
 * instead of adding one. In update mode every revision of a result is an entry of its own (record id
 * `<id>@<revision>`, payload `revision` = the micro-batch id): a newer revision moves the result's point in
 * place, an older one arriving after it (a replay) is ignored, so the page never goes back to an old value.
 */

// -- values -----------------------------------------------------------------------------------------------

const ISO_TIME = /^([+-]?\d{4,6})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?)?(Z|[+-]\d\d:?\d\d)?$/;

/**
 * An event time as epoch milliseconds, or null: a number is taken as epoch ms (the metrics stream's
 * windows); a string as ISO-8601 — sparkwire's timestamps ("2026-11-24T10:00:10.000000Z", microseconds
 * kept as a fraction of a ms), dates ("2026-11-24"), and timestamps without a zone (timestamp_ntz) as UTC.
 */
export function parseTime(value) {
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value !== "string") return null;
  const m = ISO_TIME.exec(value);
  if (!m) return null;
  const [, year, month, day, hour = "0", minute = "0", second = "0", fraction = "", zone = "Z"] = m;
  const y = Number(year);
  let ms = Date.UTC(y, Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second));
  if (y >= 0 && y < 100) {  // Date.UTC takes years 0..99 as 1900..1999
    const date = new Date(ms);
    date.setUTCFullYear(y);
    ms = date.getTime();
  }
  ms += fraction ? Number(`0.${fraction}`) * 1000 : 0;
  if (zone !== "Z") {
    const sign = zone[0] === "-" ? -1 : 1;
    const digits = zone.slice(1).replace(":", "");
    ms -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  return Number.isFinite(ms) ? ms : null;
}

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A value field as a number to draw, or null (nothing drawn there): numbers as they are, decimal strings
 * ("19.90") parsed, "NaN" / "Infinity" / "-Infinity" and anything else null.
 */
export function parseNumber(value) {
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value === "string" && DECIMAL.test(value)) {
    const number = Number(value);
    return Number.isFinite(number) ? number : null;
  }
  return null;
}

/** A Spark type (a StructType JSON field's `type`) as a value kind: integer, number, decimal or text. */
export function kindOfSparkType(type) {
  if (typeof type !== "string") return "text";  // arrays, maps, structs
  if (["byte", "short", "integer", "long"].includes(type)) return "integer";
  if (type === "float" || type === "double") return "number";
  if (type.startsWith("decimal")) return "decimal";
  return "text";  // string, boolean, date, timestamp, binary
}

// -- layouts ----------------------------------------------------------------------------------------------

function layout({ source, stream = "", title = "", mode = "append", eventTime = null, window = null,
                  valueFields = [], units = {}, revisions = false, kinds = {} }) {
  const allKinds = Object.fromEntries(valueFields.map((f) => [f, kinds[f] ?? "number"]));
  return {
    source, stream, title, mode, eventTime, window, valueFields: [...valueFields], units: { ...units }, revisions,
    kinds: allKinds,
    numericFields: valueFields.filter((f) => allKinds[f] !== "text"),
    textFields: valueFields.filter((f) => allKinds[f] === "text"),
  };
}

/** The metrics stream's layout: what `sparkwire.aggregator.job.metrics_spec` puts in its descriptor. */
export const METRICS_LAYOUT = Object.freeze(layout({
  source: "metrics", title: "Metrics", eventTime: "windowEnd", window: ["windowStart", "windowEnd"],
  valueFields: ["avg", "min", "max", "count"],
  kinds: { avg: "number", min: "number", max: "number", count: "integer" },
}));

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const isName = (value) => typeof value === "string" && value.length > 0;

/**
 * A descriptor (GET /descriptor) as the page's layout, or null if it is not one (the page then infers).
 * Value kinds come from its schema; a value field the schema does not name is taken as a number.
 */
export function layoutFromDescriptor(descriptor) {
  if (!isObject(descriptor) || descriptor.version !== 1) return null;
  const { valueFields, eventTime, window, units, schema } = descriptor;
  if (!Array.isArray(valueFields) || !valueFields.every(isName)) return null;
  if (!(eventTime === null || eventTime === undefined || isName(eventTime))) return null;
  if (!(window === null || window === undefined || (Array.isArray(window) && window.length === 2 && window.every(isName)))) {
    return null;
  }
  const kinds = {};
  for (const field of (isObject(schema) && Array.isArray(schema.fields)) ? schema.fields : []) {
    if (isObject(field) && isName(field.name)) kinds[field.name] = kindOfSparkType(field.type);
  }
  return layout({
    source: "descriptor", stream: String(descriptor.stream ?? ""), title: String(descriptor.title ?? ""),
    mode: descriptor.mode === "update" ? "update" : "append", eventTime: eventTime ?? null, window: window ?? null,
    valueFields, units: isObject(units) ? Object.fromEntries(Object.entries(units).filter(([, u]) => typeof u === "string")) : {},
    revisions: descriptor.revisions === true || descriptor.mode === "update", kinds,
  });
}

const TIME_FIELDS = ["windowEnd", "eventTime", "timestamp", "time", "ts"];
const METRICS_SHAPE = ["windowStart", "windowEnd", "count", "avg", "min", "max"];

/**
 * A layout guessed from one payload, for a stream with no descriptor: a metrics window result gets
 * METRICS_LAYOUT; otherwise the value fields are the payload's number fields (not processingId, revision,
 * the event time or the window), the event time the first of windowEnd / eventTime / timestamp / time / ts
 * that parses, and the entry is a revision when its record id is `<processingId>@<revision>`.
 */
export function inferLayout(data, recordId) {
  if (!isObject(data)) return null;
  if (typeof data.metricName === "string" && METRICS_SHAPE.every((f) => Number.isFinite(data[f]))) return METRICS_LAYOUT;
  const eventTime = TIME_FIELDS.find((f) => parseTime(data[f]) !== null) ?? null;
  const window = "windowStart" in data && "windowEnd" in data ? ["windowStart", "windowEnd"] : null;
  const revisions = typeof data.processingId === "string" && Number.isSafeInteger(data.revision)
    && recordId === `${data.processingId}@${data.revision}`;
  const skip = new Set(["processingId", eventTime, ...(window ?? []), ...(revisions ? ["revision"] : [])]);
  const valueFields = Object.keys(data).filter((f) => !skip.has(f) && typeof data[f] === "number");
  const kinds = Object.fromEntries(valueFields.map((f) => [f, Number.isInteger(data[f]) ? "integer" : "number"]));
  return layout({ source: "inferred", mode: revisions ? "update" : "append", eventTime, window, valueFields,
                  revisions, kinds });
}

/**
 * How a layout's numeric value fields are charted, in drawing order: integer fields without a unit (counts)
 * as bars on their own right-hand scale — unless every field is one, then all are lines — then the others
 * as lines on the value scale, the first the primary one; a `min` and a `max` line make a band.
 * Returns {series: [{field, kind: "bar"|"line", scale: "count"|"value", unit, role}], band: [upper, lower] | null}.
 */
export function chartSeries(layoutOrNull) {
  const l = layoutOrNull ?? METRICS_LAYOUT;
  const isBar = (f) => l.kinds[f] === "integer" && !l.units[f];
  let bars = l.numericFields.filter(isBar);
  let lines = l.numericFields.filter((f) => !isBar(f));
  if (lines.length === 0) [bars, lines] = [[], bars];
  const banded = lines.includes("min") && lines.includes("max");
  const series = [
    ...bars.map((field) => ({ field, kind: "bar", scale: "count", unit: l.units[field] ?? "", role: "bar" })),
    ...lines.map((field, i) => ({ field, kind: "line", scale: "value", unit: l.units[field] ?? "",
                                  role: banded && (field === "min" || field === "max") ? "edge" : i === 0 ? "primary" : "line" })),
  ];
  return { series, band: banded ? ["max", "min"] : null };
}

/**
 * The charts of a card, top to bottom: one per line field, so that value fields of very different sizes (an
 * order's revenue ~30,000 beside its largest order ~900, both EUR) never share an axis that flattens the
 * smaller one; a `min`/`max` pair joins the first line's chart as its band (the metrics stream: avg in its
 * min/max band), and the count bars go behind the first chart on their own right-hand scale. Each chart is
 * [{field, kind, scale, unit, role}] as `chartSeries` gives them, in its order, with `band` where it has one.
 * Returns [{series, band}].
 */
export function chartPanels(layoutOrNull) {
  const { series, band } = chartSeries(layoutOrNull);
  const bars = series.filter((s) => s.kind === "bar");
  const edges = series.filter((s) => s.role === "edge");
  const lines = series.filter((s) => s.kind === "line" && s.role !== "edge");
  if (lines.length === 0) return series.length ? [{ series, band }] : [];
  return lines.map((line, i) => i === 0
    ? { series: [...bars, line, ...edges], band }
    : { series: [line], band: null });
}

/**
 * The x range of a chart: the data's own, but at least `minWindows` windows wide, centred on the data, so
 * that a chart with one window (or a few) shows them on a scale of windows, not of years. A zoom (a range
 * other than the data's) is kept. `xs` and `windowS` in seconds.
 */
export function xRange(xs, min, max, windowS, minWindows = 6) {
  if (min == null || max == null || !xs?.length) return [min, max];
  const [first, last] = [xs[0], xs.at(-1)];
  if (min !== first || (max !== last && first !== last)) return [min, max];
  const pad = Math.max(0, minWindows * (windowS > 0 ? windowS : 60) - (last - first)) / 2;
  return [first - pad, last + pad];
}

/**
 * The x axis's labels, on one line, in the browser's time zone: `HH:MM` where a tick is on a whole minute (and
 * every tick once they are a minute or more apart), `:SS` between, and the full `HH:MM:SS` on a first tick
 * that is not on a minute, so the time of day is always on the axis. Ticks a day or more apart show the date.
 * (uPlot's own time labels add a second line for the date and the hour, which overlapped on a card's width.)
 * `splits` and `incrS` (the distance between ticks) in seconds, as uPlot's `axes[].values` gets them.
 */
export function timeTicks(splits, incrS) {
  const two = (n) => String(n).padStart(2, "0");
  return splits.map((s, i) => {
    const d = new Date(s * 1000);
    if (incrS >= 86_400) return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
    const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
    if (incrS >= 60) return hm;
    const sec = incrS >= 1 ? two(d.getSeconds()) : `${two(d.getSeconds())}.${Math.floor(d.getMilliseconds() / 100)}`;
    if (d.getSeconds() === 0 && d.getMilliseconds() === 0) return hm;
    return i === 0 ? `${hm}:${sec}` : `:${sec}`;
  });
}

// -- points -----------------------------------------------------------------------------------------------

/**
 * A payload's field by the name a descriptor gives it, or undefined: the name as a key, else a dotted path
 * into nested objects — a window struct column's bounds are "window.start" / "window.end" in the
 * descriptor, as in Spark SQL, while the payload has them as {"window": {"start": …, "end": …}}. The name
 * as a key first: a restored point keeps its fields flat under these names (ResultHistory.restore), and a
 * Spark column's own name may hold a dot. Own keys only, so a name like "constructor" is not found.
 */
export function fieldValue(data, name) {
  if (!isObject(data) || !isName(name)) return undefined;
  if (Object.hasOwn(data, name)) return data[name];
  let value = data;
  for (const part of name.split(".")) {
    if (!isObject(value) || !Object.hasOwn(value, part)) return undefined;
    value = value[part];
  }
  return value;
}

/** The payload fields a point keeps for a layout: event time, window, value fields. */
export function pointFields(l) {
  return [...new Set([l.eventTime, ...(l.window ?? []), ...l.valueFields].filter(isName))];
}

/**
 * One entry as a chart point: {processingId (the result's id), revision, x (event time in ms, else the
 * window's end, or null), and
 * the layout's fields as the payload has them (`fieldValue`: a struct's fields by their dotted names)}; null
 * when `data` is no result.
 */
export function resultPoint(l, recordId, data) {
  if (!isObject(data)) return null;
  const id = typeof data.processingId === "string" ? data.processingId : recordId;
  if (typeof id !== "string" || !id) return null;
  const point = { processingId: id };
  if (l.revisions) point.revision = Number.isSafeInteger(data.revision) ? data.revision : 0;
  // Kept flat under the descriptor's names ("window.start"), which the page and the saved history read.
  for (const field of pointFields(l)) point[field] = fieldValue(data, field) ?? null;
  // Without an event time, a window's end orders the results, as the writer orders a batch (a window struct
  // column gives no top-level column to name as event_time): the card's latest result is then the newest
  // window, not the one whose id sorts last.
  const time = l.eventTime ?? l.window?.[1] ?? null;
  point.x = time ? parseTime(fieldValue(data, time)) : null;
  return point;
}

/** A window's length in seconds from a point's window columns, or null. */
export function windowSeconds(l, point) {
  if (!l?.window || !point) return null;
  const [start, end] = l.window.map((f) => parseTime(point[f]));
  return start !== null && end !== null && end > start ? (end - start) / 1000 : null;
}

const byX = (a, b) => (a.x ?? Infinity) - (b.x ?? Infinity) || (a.processingId < b.processingId ? -1 : a.processingId > b.processingId ? 1 : 0);

const SAVED_VERSION = 2;
// Version 1 (the metrics-only page): {v: 1, epoch, throughSeq, metrics: {metric: [[processingId, ...these]]}}.
const V1_FIELDS = ["windowStart", "windowEnd", "count", "avg", "min", "max"];

export class ResultHistory {
  /**
   * @param {number} maxPointsPerKey oldest results (by event time) are dropped beyond it (localStorage is ~5 MB)
   * @param {object|null} layout the stream's layout; null: inferred from the first payload (inferLayout)
   */
  constructor(maxPointsPerKey, layout = null) {
    this.maxPointsPerKey = maxPointsPerKey;
    this.layout = layout;
    /** @type {string|null} the log epoch the points come from: seqs and results of another epoch are gone */
    this.epoch = null;
    /** @type {Map<string, Map<string, object>>} result key -> result id -> point */
    this.results = new Map();
    this.dirty = new Set();  // keys whose card must be redrawn
    this.added = 0;
    this.replaced = 0;  // results that came again (same revision) and took their own place: a repeat drew nothing
    this.revised = 0;   // newer revisions that moved their result's point in place (update mode)
    this.stale = 0;     // older revisions that came after a newer one (a replay): ignored
    this.dropped = 0;   // results beyond maxPointsPerKey
  }

  /** Start over for another epoch's log (a stream reset): its results may never be committed again. */
  reset(epoch) {
    for (const key of this.results.keys()) this.dirty.add(key);
    this.results.clear();
    this.epoch = epoch;
  }

  /** Adds, replaces or ignores the point of one entry; returns "added", "replaced", "revised", "stale" or "ignored". */
  put(key, recordId, data) {
    if (typeof key !== "string") return "ignored";
    this.layout ??= inferLayout(data, recordId);
    if (this.layout === null) return "ignored";
    const point = resultPoint(this.layout, recordId, data);
    if (point === null) return "ignored";
    let points = this.results.get(key);
    if (!points) this.results.set(key, points = new Map());
    const existing = points.get(point.processingId);
    let outcome = "added";
    if (existing) {
      const [was, now] = [existing.revision ?? 0, point.revision ?? 0];
      if (now < was) {
        this.stale += 1;
        return "stale";
      }
      outcome = now > was ? "revised" : "replaced";
    }
    points.set(point.processingId, point);
    this[outcome] += 1;
    if (points.size > this.maxPointsPerKey) this._dropOldest(points);
    this.dirty.add(key);
    return outcome;
  }

  _dropOldest(points) {
    const oldest = [...points.values()].sort(byX)[0];
    points.delete(oldest.processingId);
    this.dropped += 1;
  }

  /** One key's points in event-time order (points without one last). */
  sorted(key) {
    return [...(this.results.get(key)?.values() ?? [])].sort(byX);
  }

  /** One key's latest result: the point with the latest event time. */
  latest(key) {
    return this.sorted(key).at(-1) ?? null;
  }

  /** uPlot's columns for one key: [event time (s), ...each of `fields` as numbers], points with an event time. */
  columns(key, fields) {
    const points = this.sorted(key).filter((p) => p.x !== null);
    return [points.map((p) => p.x / 1000), ...fields.map((f) => points.map((p) => parseNumber(p[f])))];
  }

  /** Every key's points, plain data (what tests read as window.__sparkwire.series). */
  toObject() {
    return Object.fromEntries([...this.results.keys()].map((key) => [key, this.sorted(key)]));
  }

  /** How many points the page holds. */
  size() {
    let total = 0;
    for (const points of this.results.values()) total += points.size;
    return total;
  }

  /**
   * Drops a key's card and points: a removal (a filtered view in update mode, docs/protocol.md "Move-in and
   * move-out") says its newest revision no longer matches; if a later one matches again it comes as an entry
   * and the card is back with it. Returns whether the key was drawn.
   */
  remove(key) {
    const held = this.results.delete(key);
    if (held) this.dirty.add(key);
    return held;
  }

  /**
   * Starts the charts from a `GET /history` document (`fetchHistory`): its entries, and the items (latest
   * result per key) of keys with no entry among them, so every key gets its card. Returns how many points
   * it drew. The client then starts after `doc.seq` (SparkwireClient.startAfter): each entry is drawn once,
   * from the history or from the live feed, never both. A filtered document (`doc.view`: a filter or a
   * scoped token) holds the view's entries only; in update mode a key whose newest revision left the view
   * (absent from `items`) gets no card, though older revisions of it matched.
   */
  load(doc) {
    this.reset(doc.epoch);
    for (const entry of doc.entries) this.put(entry.key, entry.processingId, entry.data);
    const firstSeq = doc.entries.length ? doc.entries[0].seq : Infinity;
    for (const [key, item] of Object.entries(doc.items)) {
      if (item.seq < firstSeq) this.put(key, item.processingId, item.data);
    }
    if (doc.view !== undefined && this.layout?.revisions) this.keepOnly(Object.keys(doc.items));
    const loaded = this.size();
    this._resetCounts();  // counts of this page's life, not of what it loaded
    return loaded;
  }

  /**
   * After a snapshot at {epoch, seq}, the results before it that the page never drew, from a `GET /history`
   * document: its entries up to `seq` in that epoch (the client delivers those after it). Returns the
   * lowest seq it covered (Infinity if none): no result is missing when that is at most the page's
   * position before the snapshot + 1.
   */
  backfill(doc, epoch, seq, keys = null) {
    if (doc.epoch !== epoch || this.epoch !== epoch) return Infinity;
    let lowest = Infinity;
    for (const entry of doc.entries) {
      if (entry.seq > seq) break;
      lowest = Math.min(lowest, entry.seq);
      // `keys` (a filtered view in update mode: the snapshot's keys): a key outside them left the view.
      if (keys === null || keys.has(entry.key)) this.put(entry.key, entry.processingId, entry.data);
    }
    return lowest;
  }

  /** Drops every key but `keys` (a filtered snapshot's, in update mode: the others left the view). */
  keepOnly(keys) {
    const kept = new Set(keys);
    for (const key of [...this.results.keys()]) if (!kept.has(key)) this.remove(key);
  }

  _resetCounts() {
    this.added = this.replaced = this.revised = this.stale = 0;
  }

  /** The saved form, stamped with the client position it was saved at (see pairedStorage). */
  save(cursor) {
    const fields = this.layout ? pointFields(this.layout) : [];
    const keys = {};
    for (const [key, points] of this.results) {
      keys[key] = [...points.values()].map((p) => [p.processingId, p.revision ?? 0, ...fields.map((f) => p[f])]);
    }
    return { v: SAVED_VERSION, epoch: this.epoch, throughSeq: cursor?.seq ?? 0, layout: this.layout, fields, keys };
  }

  /**
   * Loads `saved` if it holds every result up to `cursor` (the client's restored position, from which
   * the gateway replays): points saved at or after that position leave no hole. Anything else — none
   * saved, another epoch, saved before the cursor — is refused; the page then draws from the client's
   * position on. A page without a layout takes the saved one. Returns whether it was loaded.
   */
  restore(saved, cursor) {
    if (!isObject(saved) || !(saved.v === SAVED_VERSION || saved.v === 1) || !cursor || saved.epoch !== cursor.epoch) {
      return false;
    }
    if (!(Number.isSafeInteger(saved.throughSeq) && saved.throughSeq >= cursor.seq)) return false;
    const v1 = saved.v === 1;
    const keys = v1 ? saved.metrics : saved.keys;
    const fields = v1 ? V1_FIELDS : saved.fields;
    if (!isObject(keys) || !Array.isArray(fields)) return false;
    this.reset(saved.epoch);
    this.layout ??= v1 ? METRICS_LAYOUT : (isObject(saved.layout) ? saved.layout : null);
    const head = v1 ? 1 : 2;  // processingId (and revision) before the fields
    for (const [key, rows] of Object.entries(keys)) {
      if (!Array.isArray(rows)) continue;
      for (const row of rows) {
        if (!Array.isArray(row) || row.length !== head + fields.length || typeof row[0] !== "string") continue;
        const data = Object.fromEntries(fields.map((name, i) => [name, row[head + i]]));
        data.processingId = row[0];
        if (!v1) data.revision = row[1];
        this.put(key, row[0], data);
      }
    }
    this._resetCounts();  // counts of this page's life, not of what it loaded
    return true;
  }
}

/** The metrics-only page's name for the history (its points are now any stream's results). */
export const WindowHistory = ResultHistory;

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

// -- the gateway's HTTP documents -------------------------------------------------------------------------

const bearer = (token, timeoutMs) => ({ cache: "no-store", headers: token ? { Authorization: `Bearer ${token}` } : {},
                                        ...(timeoutMs ? { signal: AbortSignal.timeout(timeoutMs) } : {}) });

/**
 * `GET /history?stream=…&last=…[&filter=…]` (docs/protocol.md): the last `last` entries of the log (the
 * gateway caps it) and the state they end at, read in one transaction. Resolves to {epoch, seq, firstSeq,
 * entries, items, digest?, view?}; rejects on an HTTP error (with the gateway's reason) or a document that is
 * not one. With a `filter` (an object, docs/protocol.md "The filter form") or a token with a scope, the
 * gateway answers the view's entries and state only, with its `view` and the `digest` at `seq`: the entries
 * may then end before `seq` (the later ones did not match), and the client starts after `seq` in that view
 * (`historyPosition`).
 */
export async function fetchHistory(stream, last, token, filter = null) {
  const query = new URLSearchParams({ stream, last: String(last) });
  if (filter !== null) query.set("filter", JSON.stringify(filter));
  const response = await fetch(`/history?${query}`, bearer(token));
  if (!response.ok) {
    const reason = await response.json().then((body) => body?.error, () => null);
    throw new Error(`GET /history: HTTP ${response.status}${typeof reason === "string" ? `: ${reason}` : ""}`);
  }
  const doc = await response.json();
  const count = (v) => Number.isSafeInteger(v) && v >= 0;
  const view = doc?.view;
  const ok = doc !== null && typeof doc === "object" && typeof doc.epoch === "string" && count(doc.seq)
    && Array.isArray(doc.entries) && doc.items !== null && typeof doc.items === "object"
    && (view === undefined || (typeof view === "string" && /^[0-9a-f]{16}$/.test(view)))
    && (doc.digest === undefined || typeof doc.digest === "string")
    && doc.entries.every((e, i) => e !== null && typeof e === "object" && typeof e.processingId === "string"
      && count(e.seq) && e.seq > (i ? doc.entries[i - 1].seq : 0))  // in seq order…
    && (doc.entries.length === 0 || doc.entries.at(-1).seq === doc.seq  // …ending where the state is
        || (view !== undefined && doc.entries.at(-1).seq < doc.seq));  // (a view: at or before it)
  if (!ok) throw new Error("GET /history: not a history document");
  return doc;
}

/**
 * Where the client starts after a `GET /history` document (SparkwireClient.startAfter): {epoch, seq, items},
 * and for a filtered document the view and the digest of the log's entry at `seq`, so that the hello's cursor
 * is of that view (a cursor of no view would get a snapshot: `view_changed`).
 */
export function historyPosition(doc) {
  const position = { epoch: doc.epoch, seq: doc.seq, items: doc.items };
  if (doc.view !== undefined) {
    position.view = doc.view;
    if (doc.digest !== undefined) position.digest = doc.digest;
  }
  return position;
}

/** Best effort, for showing only: the `scope` claim of a JWT for `stream` (the gateway reads and enforces it;
 *  a gateway reading another claim, --auth-scope-claim, is not known here). Null when none can be read. */
export function tokenScope(token, stream) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(part), (c) => c.charCodeAt(0))));
    const scope = claims?.scope;
    if (!isObject(scope)) return null;
    const own = Object.hasOwn(scope, stream) ? scope[stream] : scope["*"];
    return isObject(own) ? own : null;
  } catch {
    return null;
  }
}

const OPERATORS = { eq: "=", lt: "<", le: "≤", gt: ">", ge: "≥" };

/** A filter (docs/protocol.md "The filter form") in words for the page's header: `tenant = acme · count ≥ 10`. */
export function describeFilter(filter) {
  if (!isObject(filter)) return "";
  const scalar = (v) => typeof v === "string" ? v : JSON.stringify(v);
  return Object.entries(filter).map(([name, condition]) => {
    const field = name === "$key" ? "key" : name;
    if (!isObject(condition)) return `${field} = ${scalar(condition)}`;
    return Object.entries(condition).map(([op, operand]) => {
      if (op === "in" && Array.isArray(operand)) return `${field} in ${operand.map(scalar).join(", ")}`;
      if (op === "isNull") return operand ? `${field} absent` : `${field} present`;
      return `${field} ${OPERATORS[op] ?? op} ${scalar(operand)}`;
    }).join(" · ");
  }).join(" · ");
}

/** `GET /streams`: the names of the streams the gateway serves (with auth on, those `token` grants). */
export async function fetchStreams(token, timeoutMs = 0) {
  const response = await fetch("/streams", bearer(token, timeoutMs));
  if (!response.ok) throw new Error(`GET /streams: HTTP ${response.status}`);
  const doc = await response.json();
  if (!isObject(doc) || !Array.isArray(doc.streams) || !doc.streams.every(isName)) {
    throw new Error("GET /streams: not a stream list");
  }
  return doc.streams;
}

/** `GET /descriptor?stream=…`: the stream's descriptor, or null when its writer stored none (404). */
export async function fetchDescriptor(stream, token, timeoutMs = 0) {
  const response = await fetch(`/descriptor?${new URLSearchParams({ stream })}`, bearer(token, timeoutMs));
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`GET /descriptor: HTTP ${response.status}`);
  return response.json();
}
