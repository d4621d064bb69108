/**
 * sparkwire-client.js — browser client of the sparkwire gateway protocol v1 (docs/protocol.md): a
 * dependency-free ES module with the semantics of the Python client (sparkwire.client): every entry of
 * one stream applied once, in seq order, across dropped connections, killed pods and reconnects.
 *
 *   import { SparkwireClient } from "/static/sparkwire-client.js";  // as the gateway serves it, or
 *   import { SparkwireClient } from "sparkwire-client";              // the npm package (this folder)
 *   const client = new SparkwireClient({
 *     stream: "metrics",
 *     onEntry: (entry) => draw(entry.key, entry.data),  // {seq, processingId, key, data, commitMs}, once each
 *     onSnapshot: (state, info) => drawAll(state),      // state replaced; info {epoch, seq, reason}
 *     onStatus: (status) => show(status.state),         // connecting | open | waiting | stopped | failed
 *   });
 *   client.start();  // later: client.stop() acks what was applied and closes normally
 *   const remove = client.on("entry", (entry) => log(entry));  // more listeners, any time; remove() or client.off
 *
 * A page that loaded history first (GET /history: the last entries and the state they end at) starts
 * after it instead, `client.startAfter({epoch, seq, items})`, and gets exactly the entries after `seq`.
 *
 * Options: `url` (default `/ws` on the page's host), `token` (JWT; sent in the hello, never in the URL),
 * `initialDelayMs` 500 and `maxDelayMs` 30000 (attempt n waits uniformly in [0, min(max, initial * 2^n)]),
 * `dedupCapacity` 100000 (processingIds remembered), `storage` (default localStorage; null: none),
 * `refreshToken` (async () => a fresh JWT: called when the server closes with 4419, token expired; the
 * client then resumes at once with it — without it, 4419 is terminal), `silenceTimeoutMs` 30000 (no frame
 * at all for this long — the server pings every 20 s — means a dead or paused server: resume elsewhere),
 * `WebSocket` (the constructor to open connections with; default the global one, e.g. in Node ≥ 22),
 * `transports` (default ["websocket", "sse"]: when no WebSocket of the client has ever opened — a proxy
 * that blocks them — it falls back to Server-Sent Events, the same protocol over `POST /sse`, until the
 * next start(); `stats().transport` says which is in use), `sseUrl`
 * (default `sse` beside `url`), `fetch` (for SSE; default the global one), `filter` (only some results:
 * field -> condition, docs/protocol.md "The filter form", e.g. {tenant: "acme", count: {ge: 10}}; checked
 * here enough to throw a FilterError for a malformed one, the server's 4422 being the authority; the
 * welcome then names a `view`, kept in the cursor, and entries come in filtered frames applied by coverage;
 * `onRemoval` / the "removal" event: a key that stopped matching, dropped from the state once).
 * Read `client.state` (Map key -> {seq, processingId, data}), `client.cursor` ({epoch, seq} applied),
 * `client.welcome` (the open connection's welcome frame, e.g. its headSeq) and
 * `client.stats()` (connects, duplicates, gaps — also sent in acks —, snapshot resets by reason, closes
 * by code). Resumable closes, network errors and unknown codes reconnect; a terminal code (or a frame
 * the client cannot read: code 1002, sent on the wire as 1000 since pages may not send 1002) stops the
 * client with `client.terminal` = {code, name, reason} and onStatus {state: "failed"}.
 *
 * Persistence: the session id is saved with the cursor and the state it belongs to (whenever an ack is
 * sent), so a reloaded page resumes after its cursor with its state. The session id alone would not do:
 * a hello with a known session and no cursor resumes after the session's last ack, i.e. after entries
 * this page never applied.
 */

/** @typedef {{seq: number, processingId: string, key: string, data: unknown, commitMs: number, digest?: string}} Entry */
/** @typedef {{seq: number, processingId: string, data: unknown}} StateItem */
/** @typedef {{epoch: string, seq: number, digest?: string, view?: string}} Cursor */
/** @typedef {{seq: number, key: string, removed: true}} Removal */
/** @typedef {{state: "connecting"|"open"|"waiting"|"stopped"|"failed", code?: number, reason?: string,
 *   delayMs?: number, attempt?: number, recovered?: boolean, reset?: string|null}} Status */

export const PROTOCOL_VERSION = 1;
/** Close code -> [name, resumable]: the table of docs/protocol.md (a test compares it with the server's). */
export const CLOSE_CODES = {
  1000: ["normal", false], 1001: ["going_away", true], 1003: ["unsupported_data", false],
  1008: ["policy_violation", false], 1009: ["message_too_big", false], 1011: ["internal_error", true],
  4400: ["protocol_violation", false], 4401: ["auth_failed", false], 4403: ["forbidden_stream", false],
  4404: ["unknown_stream", false], 4408: ["timeout", true], 4409: ["stream_reset", true],
  4419: ["token_expired", true], 4422: ["invalid_filter", false], 4423: ["outside_scope", false], 4426: ["unsupported_version", false], 4429: ["slow_consumer", true], 4503: ["redis_unavailable", true],
};
// Closes nobody chose: 1005/1006 from the browser (no close frame), 1012-1014 from proxies.
const TRANSIENT = new Set([1005, 1006, 1012, 1013, 1014]);
const CLIENT_GAP_CLOSE = 1000;
const CLIENT_PROTOCOL_ERROR = 1002;
const TOKEN_EXPIRED = 4419;
const ABNORMAL_CLOSURE = 1006;  // what a silent server's connection is reported as: a drop
const UNANNOUNCED_RESET = "unannounced";  // a snapshot no welcome announced (a restart mid-connection)
const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;
const OPEN = 1;  // WebSocket.OPEN, the same in every implementation
const CLOSED = 3;  // WebSocket.CLOSED

/** Whether to reconnect and resume after `code`; unknown codes count as resumable (backoff bounds them). */
export function isResumable(code) {
  if (TRANSIENT.has(code)) return true;
  const spec = CLOSE_CODES[code];
  return spec ? spec[1] : true;
}

/** A server frame this client cannot make sense of (a server bug, or not this protocol). */
export class FrameError extends Error {}
const bad = (message) => { throw new FrameError(message); };
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;  // seqs past 2^53 cannot be told apart in JS
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const KINDS = {
  count: [isCount, "a non-negative integer"], string: [(v) => typeof v === "string", "a string"],
  bool: [(v) => typeof v === "boolean", "a boolean"], object: [isObject, "an object"],
  list: [Array.isArray, "a list"], any: [() => true, ""],
  stringOrNull: [(v) => v === null || typeof v === "string", "a string or null"],
};

function field(doc, where, name, kind) {
  if (!isObject(doc)) bad(`${where} must be an object`);
  if (!Object.hasOwn(doc, name)) bad(`${where} is missing '${name}'`);
  const [ok, what] = KINDS[kind];
  if (!ok(doc[name])) bad(`${where}.${name} must be ${what}, got ${String(JSON.stringify(doc[name])).slice(0, 40)}`);
  return doc[name];
}

// An entry's digest (docs/protocol.md, "Continuity"): optional, absent from a server older than digests.
const DIGEST = /^[0-9a-f]{16}$/;
function optionalDigest(raw, where) {
  const digest = raw.digest;
  if (digest === undefined || digest === null) return undefined;
  if (typeof digest !== "string" || !DIGEST.test(digest)) bad(`${where}.digest must be 16 lowercase hex digits`);
  return digest;
}

function stateItem(raw, where) {
  return { seq: field(raw, where, "seq", "count"), processingId: field(raw, where, "processingId", "string"),
           data: field(raw, where, "data", "any") };
}

function entryOf(raw) {
  const entry = { ...stateItem(raw, "entries[]"), key: field(raw, "entries[]", "key", "string"),
    commitMs: field(raw, "entries[]", "commitMs", "count") };
  const digest = optionalDigest(raw, "entries[]");
  return digest === undefined ? entry : { ...entry, digest };
}

/**
 * A filtered `entries` frame (docs/protocol.md, "Positions: what a filtered entries frame covers"), parsed as
 * {type: "viewEntries", epoch, after, through, digest, items}: `items` (entries and removals {seq, key, removed:
 * true}) are every entry of the log in (after, through] that the view delivers, in seq order; none: a position
 * frame. Its promises are checked: after < through, items in increasing seq order within, a digest.
 */
function viewEntries(doc) {
  const f = (name, kind) => field(doc, "entries", name, kind);
  const [epoch, after, through] = [f("epoch", "string"), f("after", "count"), f("through", "count")];
  if (after >= through) bad(`entries covers (${after}, ${through}]: after must be below through`);
  const digest = f("digest", "string");
  if (!DIGEST.test(digest)) bad("entries.digest must be 16 lowercase hex digits");
  let last = after;
  const items = f("entries", "list").map((raw) => {
    let item;
    if (isObject(raw) && Object.hasOwn(raw, "removed")) {
      if (raw.removed !== true) bad("entries[].removed must be true when present");
      item = { seq: field(raw, "entries[]", "seq", "count"), key: field(raw, "entries[]", "key", "string"),
        removed: true };
    } else {
      item = entryOf(raw);
    }
    if (!(last < item.seq && item.seq <= through)) {
      bad(`entries item seq ${item.seq} is not in increasing order within (${after}, ${through}]`);
    }
    last = item.seq;
    return item;
  });
  return { type: "viewEntries", epoch, after, through, digest, items };
}

/** A filter the client itself refuses (malformed), before any connection: the server would close with 4422. */
export class FilterError extends Error {}

const OPERATORS = new Set(["eq", "in", "lt", "le", "gt", "ge", "isNull"]);
const MAX_FILTER_NAMES = 16;
const MAX_FILTER_VALUES = 256;
const MAX_FILTER_TEXT = 256;
const MAX_CLIENT_FRAME_BYTES = 8192;
const describe = (v) => (v === null ? "null" : Array.isArray(v) ? "list" : typeof v);

/**
 * `filter` checked against docs/protocol.md's filter form, enough to fail early and clearly: an object of at
 * most 16 field names (1-256 characters, none starting with "$" but "$key"), each a scalar (equality) or an
 * object of operators eq, in (a non-empty list of scalars), lt/le/gt/ge (a finite number), isNull (a boolean);
 * scalars are strings (up to 256 characters), finite numbers or booleans, never null; at most 256 values.
 * Throws a FilterError naming the part (`filter.count.gt must be a number, got string`). Whatever passes here
 * the server may still refuse (a condition that admits nothing, a number out of range): 4422 with its reason.
 * Returns a copy, which later changes of `filter` do not reach.
 */
export function checkFilter(filter) {
  const fail = (message) => { throw new FilterError(message); };
  if (!isObject(filter)) fail(`filter must be an object of field -> condition, got ${describe(filter)}`);
  const names = Object.keys(filter);
  if (names.length > MAX_FILTER_NAMES) fail(`filter has ${names.length} fields, over the limit of ${MAX_FILTER_NAMES}`);
  let values = 0;
  const scalar = (v, where) => {
    if (v === null) fail(`${where} must not be null (use isNull)`);
    if (typeof v === "string") {
      if (v.length > MAX_FILTER_TEXT) fail(`${where} is over ${MAX_FILTER_TEXT} characters`);
    } else if (typeof v === "number") {
      if (!Number.isFinite(v)) fail(`${where} must be a finite number`);
    } else if (typeof v !== "boolean") {
      fail(`${where} must be a string, a number or a boolean, got ${describe(v)}`);
    }
    values += 1;
    return v;
  };
  for (const name of names) {
    const where = `filter.${name}`;
    if (!name.length || name.length > MAX_FILTER_TEXT) fail(`filter field names must be 1-${MAX_FILTER_TEXT} characters`);
    if (name.startsWith("$") && name !== "$key") fail(`${where}: a name starting with "$" must be "$key"`);
    const condition = filter[name];
    if (Array.isArray(condition)) fail(`${where} must be a value or an object of operators, got a list (use "in")`);
    const ops = isObject(condition) ? condition : { eq: condition };
    const keys = Object.keys(ops);
    if (!keys.length) fail(`${where} names no operator (eq, in, lt, le, gt, ge, isNull)`);
    for (const op of keys) {
      const operand = ops[op];
      const at = isObject(condition) ? `${where}.${op}` : where;
      if (!OPERATORS.has(op)) fail(`${at}: unknown operator (eq, in, lt, le, gt, ge, isNull)`);
      if (operand === null) fail(`${at} must not be null${op === "isNull" ? "" : " (use isNull)"}`);
      if (op === "in") {
        if (!Array.isArray(operand) || !operand.length) fail(`${at} must be a non-empty list, got ${describe(operand)}`);
        operand.forEach((v, i) => scalar(v, `${at}[${i}]`));
      } else if (op === "eq") {
        scalar(operand, at);
      } else if (op === "isNull") {
        if (typeof operand !== "boolean") fail(`${at} must be a boolean, got ${describe(operand)}`);
      } else if (typeof operand !== "number" || !Number.isFinite(operand)) {
        fail(`${at} must be a finite number, got ${describe(operand)}`);
      }
      if (name === "$key" && !(op === "eq" || op === "in")) fail(`${at}: $key takes eq and in only`);
      if (name === "$key" && [operand].flat().some((v) => typeof v !== "string")) fail(`${at}: $key values must be strings`);
    }
  }
  if (values > MAX_FILTER_VALUES) fail(`filter has ${values} values (eq and in), over the limit of ${MAX_FILTER_VALUES}`);
  return JSON.parse(JSON.stringify(filter));
}

/** Refuses a filter whose hello (with `token` and the longest cursor) could exceed the server's 8 KiB limit
 * for a client frame, which it would close with 1009. */
function checkHelloSize(filter, token) {
  const cursor = { epoch: "e".repeat(64), seq: 0, digest: "0".repeat(16), view: "0".repeat(16) };
  const hello = JSON.stringify({ type: "hello", v: PROTOCOL_VERSION, session: "s".repeat(128), cursor, token, filter })
    .replace('"seq":0', '"seq":18446744073709551615');
  const bytes = new TextEncoder().encode(hello).length;
  if (bytes > MAX_CLIENT_FRAME_BYTES) {
    throw new FilterError(`filter: a hello with this filter (and token) takes up to ${bytes} bytes, over the `
      + `${MAX_CLIENT_FRAME_BYTES}-byte limit of a client frame`);
  }
}

/** `value` as JSON with object keys sorted, so that equal filters name the same saved position. */
function sortedJson(value) {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(",")}]`;
  if (isObject(value)) {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${sortedJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** One server frame, checked enough that a malformed one cannot corrupt the client's state. */
export function parseFrame(text) {
  if (typeof text !== "string") bad("the server sent a binary frame; frames are JSON text");
  let doc;
  try { doc = JSON.parse(text); } catch (error) { bad(`frame is not JSON: ${error.message}`); }
  if (!isObject(doc)) bad("frame must be an object");
  const type = field(doc, "frame", "type", "string");
  const f = (name, kind) => field(doc, type, name, kind);
  switch (type) {
    case "welcome": {
      const welcome = { type, session: f("session", "string"), epoch: f("epoch", "string"),
        headSeq: f("headSeq", "count"), recovered: f("recovered", "bool"), reset: f("reset", "stringOrNull"),
        ackEvery: f("ackEvery", "count"), ackIntervalMs: f("ackIntervalMs", "count") };
      if (welcome.ackEvery < 1) bad("welcome.ackEvery must be at least 1");
      if (doc.view === undefined || doc.view === null) return welcome;  // unfiltered
      if (typeof doc.view !== "string" || !DIGEST.test(doc.view)) bad("welcome.view must be 16 lowercase hex digits");
      return { ...welcome, view: doc.view };
    }
    case "snapshot": {
      const items = new Map();
      for (const [key, raw] of Object.entries(f("items", "object"))) items.set(key, stateItem(raw, "snapshot item"));
      const snapshot = { type, epoch: f("epoch", "string"), seq: f("seq", "count"), items, more: f("more", "bool") };
      const digest = optionalDigest(doc, "snapshot");
      return digest === undefined ? snapshot : { ...snapshot, digest };
    }
    case "entries": {
      if (Object.hasOwn(doc, "after")) return viewEntries(doc);  // a filtered subscription's frame
      const entries = f("entries", "list").map(entryOf);
      return { type, epoch: f("epoch", "string"), entries };
    }
    case "error": return { type, code: f("code", "count"), name: f("name", "string"), reason: f("reason", "string") };
    case "acks": {  // the pod's ack budget moved: ack as it now asks (docs/protocol.md)
      const acks = { type, ackEvery: f("ackEvery", "count"), ackIntervalMs: f("ackIntervalMs", "count") };
      if (acks.ackEvery < 1) bad("acks.ackEvery must be at least 1");
      return acks;
    }
    case "ping": case "pong": return { type, t: f("t", "count") };
    default: return { type: "unknown", name: type };  // a newer server's addition: not a reason to drop
  }
}

/** Remembers the last `capacity` processingIds seen; a repeat refreshes its place (a Map keeps order). */
export class Deduper {
  constructor(capacity) { this.capacity = capacity; this.duplicates = 0; this.seen = new Map(); }
  /** True if `id` was seen (and is still remembered); records it either way. */
  isDuplicate(id) {
    if (this.seen.delete(id)) { this.seen.set(id, true); this.duplicates += 1; return true; }
    this.seen.set(id, true);
    if (this.seen.size > this.capacity) this.seen.delete(this.seen.keys().next().value);
    return false;
  }
}

/** `text` cut to the 123 UTF-8 bytes a close frame's reason may hold (close() throws beyond that). */
function closeReason(text) {
  const encoder = new TextEncoder();
  if (encoder.encode(text).length <= 123) return text;
  let out = "";
  for (const ch of text) { if (encoder.encode(out + ch).length > 120) break; out += ch; }
  return `${out}...`;
}

function randomId() {  // crypto.randomUUID needs a secure context; getRandomValues does not
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function defaultStorage() {
  try { return globalThis.localStorage ?? null; } catch { return null; }  // blocked (sandboxed frame, settings)
}

function safely(callback, ...args) {  // an application error must not leave a frame half applied
  if (!callback) return;
  try { callback(...args); } catch (error) { setTimeout(() => { throw error; }); }
}

const now = () => performance.now();
// The constructor's callback of each event that on() adds listeners to.
const CALLBACKS = { entry: "onEntry", snapshot: "onSnapshot", status: "onStatus", removal: "onRemoval" };

/**
 * A `text/event-stream` read as the WHATWG HTML standard says (§ 9.2.6, "Interpreting an event stream"):
 * lines end with CRLF, LF or CR (a chunk may end between a CR and its LF); a line starting with ':' is a
 * comment; `field: value` loses one leading space of its value, and a line without a colon is a field
 * with an empty value; `data` lines are joined with '\n'; `event` names the event ("message" when none);
 * `id` sets the last event ID (unless it holds a NUL), which stays for the events after it; `retry` (ASCII
 * digits only) sets `retry`; other fields are ignored; an empty line dispatches the event, unless no data
 * came; a byte order mark at the start is dropped; what follows the last empty line when the stream ends
 * is discarded. Feed it decoded text (a TextDecoderStream keeps UTF-8 sequences split across chunks whole).
 *
 *   const parser = new EventStreamParser();
 *   for (const event of parser.push(chunk)) handle(event.type, event.data, event.lastEventId);
 */
export class EventStreamParser {
  constructor() {
    this.buffer = "";  // the start of a line whose end has not come yet (never holds a CR or LF)
    this.started = false;  // whether any text came: a BOM is dropped only at the start
    this.afterCR = false;  // the last chunk ended with a CR: an LF starting the next one belongs to it
    this.data = "";
    this.eventType = "";
    this.idBuffer = "";
    /** The last event ID as of the last dispatch (the standard's "last event ID string"). */
    this.lastEventId = "";
    /** The reconnection time (ms) the stream last asked for; null while it asked for none. */
    this.retry = null;
  }

  /** Reads `chunk`; returns the events it completed, each {type, data, lastEventId}, in order. */
  push(chunk) {
    let text = String(chunk);
    if (!text) return [];
    if (!this.started) { this.started = true; if (text[0] === "\uFEFF") text = text.slice(1); }
    if (this.afterCR) { this.afterCR = false; if (text[0] === "\n") text = text.slice(1); }
    const events = [];
    const buffer = this.buffer + text;
    const lineEnd = /\r\n|\r|\n/g;
    lineEnd.lastIndex = this.buffer.length;  // the held part has no line end: no need to search it again
    let start = 0;
    for (let match; (match = lineEnd.exec(buffer));) {
      this._line(buffer.slice(start, match.index), events);
      start = match.index + match[0].length;
      if (match[0] === "\r" && start === buffer.length) this.afterCR = true;
    }
    this.buffer = buffer.slice(start);
    return events;
  }

  /** The stream ended: an event not closed by an empty line is discarded, as the standard says. */
  end() {
    [this.buffer, this.data, this.eventType, this.afterCR] = ["", "", "", false];
  }

  _line(line, events) {
    if (line === "") return this._dispatch(events);
    if (line[0] === ":") return undefined;  // a comment
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value[0] === " ") value = value.slice(1);
    if (name === "data") this.data += `${value}\n`;
    else if (name === "event") this.eventType = value;
    else if (name === "id") { if (!value.includes("\0")) this.idBuffer = value; }
    else if (name === "retry") { if (/^[0-9]+$/.test(value)) this.retry = Number(value); }
    return undefined;
  }

  _dispatch(events) {
    this.lastEventId = this.idBuffer;
    if (this.data !== "") {
      events.push({ type: this.eventType || "message", data: this.data.slice(0, -1), lastEventId: this.lastEventId });
    }
    [this.data, this.eventType] = ["", ""];
  }
}

/**
 * The protocol over Server-Sent Events, with the WebSocket interface the client uses (send, close,
 * readyState, onopen/onmessage/onclose): the first frame sent (the hello) opens `POST /sse` and each event
 * of its `text/event-stream` answer is a server frame; later frames are posted in order, a batch at a time,
 * to `POST /sse/frames` for the connection the answer named. The `close` event is the close code; an
 * answer that ends without one, a failed request, or frames the pod no longer knows of (404: the
 * connection is gone or the request reached another pod) is a drop (1006): the client resumes.
 * `affinity` goes with every request (`X-Sparkwire-Affinity`) for proxies that keep a client on one pod.
 */
export class SseSocket {
  constructor(url, { fetch: fetcher = globalThis.fetch, affinity = randomId() } = {}) {
    // Called unbound: a browser's fetch throws "Illegal invocation" when called as another object's method.
    [this.url, this.fetch, this.affinity] = [url, (...args) => fetcher(...args), affinity];
    this.readyState = OPEN;  // frames can be sent at once: the hello is what opens the request
    this.onopen = this.onmessage = this.onclose = null;
    this.connection = null;
    this.outbox = [];
    this.posting = false;
    this.aborter = new AbortController();
    setTimeout(() => { if (this.readyState === OPEN) this.onopen?.({}); });
  }

  send(text) {
    if (this.readyState !== OPEN) return;
    if (!this.started) {
      this.started = true;
      this._stream(text).catch((error) => this._end(ABNORMAL_CLOSURE, `event stream failed: ${error}`));
    } else {
      this.outbox.push(text);
      this._post();
    }
  }

  close() {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSED;
    this.aborter.abort();
  }

  _headers(type) { return { "content-type": type, "x-sparkwire-affinity": this.affinity }; }

  async _stream(hello) {
    const response = await this.fetch(this.url, { method: "POST", body: hello, headers: this._headers("text/plain"),
      signal: this.aborter.signal, cache: "no-store", credentials: "same-origin" });
    if (!response.ok || !response.body) return this._end(ABNORMAL_CLOSURE, `POST /sse answered ${response.status}`);
    this.connection = response.headers.get("x-sparkwire-connection");
    this._post();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new EventStreamParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return this._end(ABNORMAL_CLOSURE, "the event stream ended without a close");
      for (const event of parser.push(value)) {
        if (this.readyState !== OPEN) return;
        if (event.type === "close") {
          const close = JSON.parse(event.data);
          return this._end(close.code, close.reason);
        }
        // Frames are "message" events; another type would be a newer server's addition (as EventSource's
        // onmessage, this socket hears only messages). Comments (a proxy's keep-alive) are no events at all.
        if (event.type === "message") this.onmessage?.({ data: event.data });
      }
    }
  }

  /** Post what is waiting, one request at a time so that acks arrive in the order they were sent. */
  async _post() {
    if (this.posting || !this.connection || !this.outbox.length || this.readyState !== OPEN) return;
    this.posting = true;
    const frames = this.outbox.splice(0);
    const url = new URL("sse/frames", this.url);
    url.search = new URLSearchParams({ connection: this.connection }).toString();
    try {
      const response = await this.fetch(url.href, { method: "POST", body: frames.join("\n"),
        headers: this._headers("text/plain"), cache: "no-store", credentials: "same-origin" });
      if (response.status === 404) this._end(ABNORMAL_CLOSURE, "the connection is gone from its pod; resuming");
      else if (!response.ok) this._end(ABNORMAL_CLOSURE, `POST /sse/frames answered ${response.status}`);
    } catch (error) {
      this._end(ABNORMAL_CLOSURE, `POST /sse/frames failed: ${error}`);
    } finally {
      this.posting = false;
    }
    this._post();
  }

  _end(code, reason) {
    if (this.readyState === CLOSED) return;
    this.close();
    this.onclose?.({ code, reason });
  }
}

export class SparkwireClient {
  constructor(options) {
    if (!options?.stream) throw new TypeError("SparkwireClient needs a stream");
    this.options = { initialDelayMs: 500, maxDelayMs: 30000, dedupCapacity: 100000, silenceTimeoutMs: 30000,
      ...options };
    this.token = this.options.token ?? null;
    const url = new URL(this.options.url ?? "/ws", globalThis.location?.href);
    if (url.protocol === "http:" || url.protocol === "https:") url.protocol = url.protocol.replace("http", "ws");
    url.searchParams.set("stream", this.options.stream);
    this.url = url.href;
    const sseUrl = new URL(this.options.sseUrl ?? "sse", url);
    if (sseUrl.protocol === "ws:" || sseUrl.protocol === "wss:") sseUrl.protocol = sseUrl.protocol.replace("ws", "http");
    sseUrl.searchParams.set("stream", this.options.stream);
    this.sseUrl = sseUrl.href;
    this.transports = this.options.transports ?? ["websocket", "sse"];
    if (!this.transports.length || this.transports.some((t) => t !== "websocket" && t !== "sse")) {
      throw new TypeError('transports must list "websocket" and/or "sse"');
    }
    [this.transport, this.websocketOpened] = [this.transports[0], false];
    this.affinity = randomId();  // one per client: its SSE requests reach one pod behind a hashing proxy
    /** The subscription's filter (a checked copy of the option); null: every result. */
    this.filter = this.options.filter == null ? null : checkFilter(this.options.filter);
    if (this.filter !== null) checkHelloSize(this.filter, this.token);
    this.storage = this.options.storage === undefined ? defaultStorage() : this.options.storage;
    // A filtered subscription saves its position apart: one covered under another view is another client's.
    this.storageKey = `sparkwire:${this.options.stream}`
      + (this.filter === null ? "" : `?filter=${sortedJson(this.filter)}`);
    this.sessionId = randomId();  // generated now so that the first hello already names it
    /** @type {string|null} set with the first snapshot or entry applied: from then on there is a cursor */
    this.epoch = null;
    this.lastSeq = 0;  // the last seq applied with none missing before it
    // The digest of the entry at lastSeq (sent by the server with every entry and snapshot), sent back with the
    // cursor and acks: a gateway resumes only a log that still holds that entry there. null: not known.
    /** @type {string|null} */
    this.digest = null;
    // The view (the welcome's, 16 hex digits) lastSeq was covered under; null: unfiltered. Sent in the cursor.
    /** @type {string|null} */
    this.view = null;
    this.removals = 0;  // keys a removal took out of the state
    /** @type {Map<string, StateItem>} */
    this.state = new Map();
    this.deduper = new Deduper(this.options.dedupCapacity);
    this.seqDuplicates = 0;
    this.gaps = 0;
    /** @type {Record<string, number>} snapshot starts by reason */
    this.resets = {};
    this.counts = { connects: 0, opened: 0, connectionFailures: 0, framesReceived: 0, acksSent: 0, unknownFrames: 0 };
    /** @type {Record<number, number>} how connections ended, by close code */
    this.closes = {};
    /** @type {{code: number, name: string, reason: string}|null} why the client stopped by itself */
    this.terminal = null;
    this.lastError = null;
    this.conn = null;
    this.running = false;
    this.attempt = 0;
    /** @type {{entry: Set<Function>, snapshot: Set<Function>, status: Set<Function>}} listeners added with on() */
    this.listeners = { entry: new Set(), snapshot: new Set(), status: new Set(), removal: new Set() };
    this.restored = this._restore();
  }

  /** @returns {Cursor|null} the last entry applied (or the snapshot's position), sent in the next hello */
  get cursor() {
    if (this.epoch === null) return null;
    // Only with a digest (a view) the server gave: an older server refuses a cursor with an unknown field.
    const cursor = { epoch: this.epoch, seq: this.lastSeq };
    if (this.digest !== null) cursor.digest = this.digest;
    if (this.view !== null) cursor.view = this.view;
    return cursor;
  }
  /** The open connection's welcome ({headSeq, epoch, recovered, reset, …}: where the log stood when it
   *  began); null between connections. Read-only: a page shows how far behind the log it is. */
  get welcome() { return this.conn?.welcome ?? null; }
  /** Entries dropped as repeats, by seq or by processingId, since the session began. */
  get duplicates() { return this.seqDuplicates + this.deduper.duplicates; }

  stats() {
    const c = this.counts;
    return { connects: c.connects, reconnects: Math.max(0, c.opened - 1), connectionFailures: c.connectionFailures,
      duplicates: this.duplicates, gaps: this.gaps, resets: { ...this.resets }, framesReceived: c.framesReceived,
      acksSent: c.acksSent, unknownFrames: c.unknownFrames, closes: { ...this.closes }, terminal: this.terminal,
      cursor: this.cursor, sessionId: this.sessionId, transport: this.transport, removals: this.removals };
  }

  start() {
    if (this.running) return;
    this.running = true;
    [this.terminal, this.lastError, this.attempt] = [null, null, 0];
    [this.transport, this.websocketOpened] = [this.transports[0], false];
    if (this.restored) {
      this.restored = false;
      this._emit("snapshot", this.state, { epoch: this.epoch, seq: this.lastSeq, reason: "restored" });
    }
    this._connect();
  }

  /**
   * Instead of start(): start after a position read elsewhere — typically `GET /history` (docs/protocol.md),
   * whose entries the caller drew — rather than from a snapshot. `position` is {epoch, seq, items?, digest?,
   * view?} (a filtered client: /history with the same filter, its `digest` and `view`): the
   * client takes it as if it had applied every entry up to `seq` of `epoch`, with `items` (key ->
   * {seq, processingId, data}, the state as of `seq`) as its state, and its hello carries the cursor
   * {epoch, seq}, so the gateway sends exactly the entries after `seq`; if the log no longer holds them
   * (trimmed meanwhile, another epoch), the gateway answers with a snapshot (onSnapshot with its reason).
   * Only for a client with no position of its own: a client that restored one from storage, or has
   * applied anything, ignores `position` and starts from its own. Returns whether `position` was taken;
   * throws a TypeError (starting nothing) for a malformed one.
   */
  startAfter(position) {
    if (this.running) return false;
    if (this.epoch !== null) { this.start(); return false; }
    let items;
    try {
      const epoch = field(position, "position", "epoch", "string");
      const seq = field(position, "position", "seq", "count");
      const raw = position.items ?? {};
      if (!isObject(raw)) bad("position.items must be an object");
      items = Object.entries(raw).map(([key, item]) => [key, stateItem(item, "position item")]);
      const digest = optionalDigest(position, "position");  // GET /history's last entry's, when given
      const view = position.view ?? null;  // GET /history's with a filter (or a scoped token)
      if (view !== null && (typeof view !== "string" || !DIGEST.test(view))) bad("position.view must be 16 lowercase hex digits");
      [this.epoch, this.lastSeq, this.digest, this.view] = [epoch, seq, digest ?? null, view];
    } catch (error) {
      if (error instanceof FrameError) throw new TypeError(error.message);
      throw error;
    }
    this.state = new Map(items);
    this.start();
    return true;
  }

  /** Close normally after a last ack; no reconnect. */
  stop() {
    this.running = false;
    clearTimeout(this.retryTimer);
    const conn = this.conn;
    if (conn) {
      if (conn.ws.readyState === OPEN) for (const frame of this._ackIfMoved(conn)) conn.ws.send(frame);
      this._close(conn, 1000, "client stopping", {});
    }
    this._status({ state: "stopped" });
  }

  /**
   * Calls `listener` on every `event` from now on, after the constructor's callback of that event: "entry"
   * (entry), "snapshot" (state, info) or "status" (status), as onEntry, onSnapshot and onStatus. Returns a
   * function that removes it (as off does). A listener added twice is called once; one added or removed
   * while an event is being told hears of it from the next event on.
   */
  on(event, listener) {
    if (typeof listener !== "function") throw new TypeError("a listener must be a function");
    this._listenersOf(event).add(listener);
    return () => this.off(event, listener);
  }

  /** Removes `listener` from `event`'s listeners (nothing if it is not one). */
  off(event, listener) { this._listenersOf(event).delete(listener); }

  _listenersOf(event) {
    const listeners = this.listeners[event];
    if (!listeners) throw new TypeError(`no event '${event}': entry, snapshot, status or removal`);
    return listeners;
  }

  _emit(event, ...args) {
    safely(this.options[CALLBACKS[event]], ...args);
    for (const listener of [...this.listeners[event]]) safely(listener, ...args);
  }

  _status(status) { this._emit("status", status); }

  _connect() {
    const conn = { ws: this._open(), transport: this.transport, opened: false, welcome: null, acks: null,
      snapshotParts: [], snapshotExpected: false, snapshotReason: null, ackedSeq: null, unacked: 0, unackedSince: null, ackTimer: null,
      silenceTimer: null, sentCursor: false, startAtFirstFrame: false };
    this.conn = conn;
    this._status({ state: "connecting", attempt: this.attempt });
    conn.ws.onopen = () => {
      if (conn.transport === "websocket") this.websocketOpened = true;
      conn.opened = true; this.counts.opened += 1; conn.sentCursor = this.cursor !== null;
      conn.ws.send(this._hello()); this._heard(conn);
    };
    conn.ws.onmessage = (event) => { this._heard(conn); this._onMessage(conn, event.data); };
    conn.ws.onclose = (event) => this._ended(conn, { code: event.code, reason: event.reason });
    // A socket that cannot open fires error; browsers then close it (1006), Node 20's never does: a drop.
    conn.ws.onerror = () => {
      if (!conn.opened && this.conn === conn) this._close(conn, 1000, "could not open", { code: ABNORMAL_CLOSURE });
    };
  }

  _open() {
    if (this.transport === "sse") {
      return new SseSocket(this.sseUrl, { fetch: this.options.fetch ?? globalThis.fetch, affinity: this.affinity });
    }
    const Socket = this.options.WebSocket ?? globalThis.WebSocket;
    return new Socket(this.url);
  }

  /** A frame (or the open) arrived: the server is alive; silence from now on is counted again. */
  _heard(conn) {
    clearTimeout(conn.silenceTimer);
    const ms = this.options.silenceTimeoutMs;
    conn.silenceTimer = setTimeout(() => {
      if (this.conn === conn) this._close(conn, 1000, `no frame from the server for ${ms} ms`, { code: ABNORMAL_CLOSURE });
    }, ms);
  }

  _hello() {
    const hello = { type: "hello", v: PROTOCOL_VERSION, session: this.sessionId };
    if (this.cursor) hello.cursor = this.cursor;
    if (this.token != null) hello.token = this.token;
    if (this.filter !== null) hello.filter = this.filter;
    return JSON.stringify(hello);
  }

  _onMessage(conn, data) {
    this.counts.framesReceived += 1;
    let reaction;
    try {
      reaction = this._handle(conn, parseFrame(data));
    } catch (error) {
      if (!(error instanceof FrameError)) throw error;
      reaction = { protocolError: error.message };
    }
    for (const frame of reaction.send ?? []) conn.ws.send(frame);
    if (reaction.gap) {
      // Entries after a hole are not applied: the cursor stays before it and a resume refills it.
      const reason = `gap: expected seq ${reaction.gap.expected}, got ${reaction.gap.got}; resuming`;
      this._close(conn, CLIENT_GAP_CLOSE, reason, { clientGap: true });
    } else if (reaction.protocolError) {
      this._close(conn, 1000, reaction.protocolError, { refused: true, code: CLIENT_PROTOCOL_ERROR });
    } else if (conn.ackTimer === null) {
      this._scheduleAck(conn);
    }
  }

  _handle(conn, frame) {
    if (!conn.welcome && !["welcome", "error", "ping", "pong", "unknown"].includes(frame.type)) {
      return { protocolError: `${frame.type} before welcome` };
    }
    switch (frame.type) {
      case "welcome": return this._onWelcome(conn, frame);
      case "snapshot": return this._onSnapshot(conn, frame);
      case "entries":
        if (conn.welcome.view !== undefined) return { protocolError: "an unfiltered entries frame on a connection with a view" };
        return this._onEntries(conn, frame);
      case "viewEntries": return this._onViewEntries(conn, frame);
      case "error": this.lastError = frame; return {};
      case "acks": conn.acks = { ackEvery: frame.ackEvery, ackIntervalMs: frame.ackIntervalMs }; return {};
      case "ping": return { send: [JSON.stringify({ type: "pong", t: frame.t })] };
      case "unknown": this.counts.unknownFrames += 1; return {};
      default: return {};
    }
  }

  _onWelcome(conn, welcome) {
    if (conn.welcome) return { protocolError: "second welcome on one connection" };
    conn.welcome = welcome;
    conn.acks = { ackEvery: welcome.ackEvery, ackIntervalMs: welcome.ackIntervalMs };  // until an "acks" frame
    this.counts.connects += 1;
    this.sessionId = welcome.session;  // the server may refuse ours and hand out a new one
    if (this.filter !== null && welcome.view === undefined) {
      // A server that ignored the filter would send every row.
      return { protocolError: "the hello asked for a filter but the welcome names no view" };
    }
    // Resumed: the server resumed this position in the welcome's view, so it is that view's.
    if (welcome.recovered) this.view = welcome.view ?? null;
    // Resumed from the session's last ack, a seq this client never learnt: the first filtered frame says where.
    if (welcome.recovered && !conn.sentCursor) conn.startAtFirstFrame = true;
    if (!welcome.recovered) {
      conn.snapshotReason = welcome.reset ?? "unspecified";
      this.resets[conn.snapshotReason] = (this.resets[conn.snapshotReason] ?? 0) + 1;
      conn.snapshotExpected = true;
    }
    // Resumed: ack the cursor once on this connection, even with nothing new. The last connection's final ack
    // may have been lost with it (a killed pod; over SSE, posted to a pod that no longer held it), and the
    // session's bookmark would lag until new entries came.
    if (welcome.recovered && this.epoch !== null) this._markProgress(conn, 0);
    this._status({ state: "open", recovered: welcome.recovered, reset: welcome.reset });
    return {};
  }

  _onSnapshot(conn, part) {
    const parts = conn.snapshotParts;
    if (parts.length && (part.epoch !== parts[0].epoch || part.seq !== parts[0].seq)) {
      const [got, open] = [`${part.epoch}/${part.seq}`, `${parts[0].epoch}/${parts[0].seq}`];
      return { protocolError: `snapshot part of ${got} inside one of ${open}` };
    }
    if (!parts.length && !conn.snapshotExpected) {
      conn.snapshotReason = UNANNOUNCED_RESET;
      this.resets[UNANNOUNCED_RESET] = (this.resets[UNANNOUNCED_RESET] ?? 0) + 1;
    }
    parts.push(part);
    if (part.more) return {};  // state is replaced only once whole: a half snapshot is no state at all
    conn.snapshotParts = [];
    conn.snapshotExpected = false;
    this.state = new Map(parts.flatMap((p) => [...p.items]));
    this.lastSeq = part.seq;
    this.epoch = part.epoch;
    this.digest = part.digest ?? null;
    this.view = conn.welcome.view ?? null;  // filtered as its connection
    this._markProgress(conn, 0);
    this._emit("snapshot", this.state, { epoch: part.epoch, seq: part.seq, reason: conn.snapshotReason });
    return {};
  }

  _onEntries(conn, frame) {
    if (conn.snapshotParts.length || conn.snapshotExpected) {
      return { protocolError: "entries before the snapshot was complete" };
    }
    let moved = 0;
    for (const entry of frame.entries) {
      if (entry.seq <= this.lastSeq) { this.seqDuplicates += 1; continue; }
      if (entry.seq > this.lastSeq + 1) {
        this.gaps += 1;
        if (moved) this._markProgress(conn, moved);
        return { send: this._ackIfMoved(conn), gap: { expected: this.lastSeq + 1, got: entry.seq } };
      }
      this.lastSeq = entry.seq;
      moved += 1;
      this.epoch = frame.epoch;
      this.digest = entry.digest ?? null;
      // The seq is taken either way (the next seq follows it); only a new result is applied (onEntry). The
      // state follows the log's newest item per key even for a skipped duplicate: after a lost log, the batch
      // the killed driver had committed comes again after the new epoch's snapshot (session.py does the same).
      this.state.set(entry.key, { seq: entry.seq, processingId: entry.processingId, data: entry.data });
      if (!this.deduper.isDuplicate(entry.processingId)) this._emit("entry", entry);
    }
    if (moved) this._markProgress(conn, moved);
    return { send: this._dueAcks(conn) };
  }

  /**
   * A filtered frame, applied by coverage (client/coverage.py, view.py): lastSeq is `covered`, the seq up to which
   * the client holds every entry of its view. after <= covered < through: apply the items above covered (those at
   * or below are repeats), covered := through, the digest the frame's; through <= covered: a repeat, dropped;
   * after > covered: (covered, after] is unaccounted for, a gap: ack what was applied and resume from covered.
   */
  _onViewEntries(conn, frame) {
    if (conn.welcome.view === undefined) {
      return { protocolError: "a filtered entries frame on a connection whose welcome names no view" };
    }
    if (conn.snapshotParts.length || conn.snapshotExpected) {
      return { protocolError: "entries before the snapshot was complete" };
    }
    if (conn.startAtFirstFrame) {
      // Unlike an unfiltered frame, a filtered one says where it continues: its after.
      conn.startAtFirstFrame = false;
      [this.lastSeq, this.digest] = [frame.after, null];
    }
    const covered = this.lastSeq;
    if (frame.through <= covered) { this.seqDuplicates += frame.items.length; return {}; }
    if (frame.after > covered) {
      this.gaps += 1;
      return { send: this._ackIfMoved(conn), gap: { expected: covered + 1, got: frame.after + 1 } };
    }
    const fresh = frame.items.filter((item) => item.seq > covered);
    this.seqDuplicates += frame.items.length - fresh.length;
    [this.lastSeq, this.digest, this.epoch, this.view] = [frame.through, frame.digest, frame.epoch, conn.welcome.view];
    let entries = 0;
    for (const item of fresh) {
      if (item.removed) {
        // Idempotent: a removal of a key not held (filtered out, or removed already) changes nothing.
        if (this.state.delete(item.key)) { this.removals += 1; this._emit("removal", item); }
        continue;
      }
      entries += 1;
      this.state.set(item.key, { seq: item.seq, processingId: item.processingId, data: item.data });
      if (!this.deduper.isDuplicate(item.processingId)) this._emit("entry", item);
    }
    this._markProgress(conn, entries);  // a position frame moves the position too: the ack clock starts
    return { send: this._dueAcks(conn) };
  }

  // -- acks: after ackEvery entries or ackIntervalMs since the seq moved, whichever first ---------------

  _markProgress(conn, entries) {
    if (this.lastSeq === conn.ackedSeq) return;
    conn.unacked += entries;
    if (conn.unackedSince === null) conn.unackedSince = now();
  }

  _ackIfMoved(conn) {
    if (!conn.welcome || this.lastSeq === conn.ackedSeq || conn.unackedSince === null) return [];
    conn.ackedSeq = this.lastSeq;
    conn.unacked = 0;
    conn.unackedSince = null;
    this.counts.acksSent += 1;
    this._save();  // what the server hears of is what a reloaded page resumes from
    const ack = { type: "ack", seq: this.lastSeq, duplicates: this.duplicates, gaps: this.gaps };
    if (this.digest !== null) ack.digest = this.digest;
    return [JSON.stringify(ack)];
  }

  _msUntilAck(conn) {
    if (!conn.acks || conn.unackedSince === null) return null;
    return Math.max(0, conn.unackedSince + conn.acks.ackIntervalMs - now());
  }

  _dueAcks(conn) {
    if (!conn.acks) return [];
    return conn.unacked >= conn.acks.ackEvery || this._msUntilAck(conn) === 0 ? this._ackIfMoved(conn) : [];
  }

  _scheduleAck(conn) {
    const ms = this._msUntilAck(conn);
    if (ms === null) return;
    conn.ackTimer = setTimeout(() => {
      conn.ackTimer = null;
      if (this.conn !== conn || conn.ws.readyState !== OPEN) return;
      for (const frame of this._dueAcks(conn)) conn.ws.send(frame);
      this._scheduleAck(conn);
    }, ms);
  }

  // -- the end of a connection, and what comes next -------------------------------------------------------

  _close(conn, code, reason, how) {
    conn.ws.onmessage = conn.ws.onclose = conn.ws.onopen = conn.ws.onerror = null;  // nothing more is applied
    conn.ws.close(code, closeReason(reason));
    this._ended(conn, { code, reason, ...how });  // how.code: what to report instead of the code sent
  }

  _ended(conn, { code, reason, clientGap = false, refused = false }) {
    if (this.conn !== conn) return;
    this.conn = null;
    clearTimeout(conn.ackTimer);
    clearTimeout(conn.silenceTimer);
    if (!this.running) return;  // stopped on purpose
    if (!conn.opened) this.counts.connectionFailures += 1;
    this.closes[code] = (this.closes[code] ?? 0) + 1;
    const refreshable = code === TOKEN_EXPIRED && typeof this.options.refreshToken === "function";
    if (refused || (!clientGap && !isResumable(code)) || (code === TOKEN_EXPIRED && !refreshable)) {
      // The error frame sent before the close holds the reason the close frame may truncate.
      const full = this.lastError?.code === code ? this.lastError.reason : reason;
      this.terminal = { code, name: CLOSE_CODES[code]?.[0] ?? "unknown", reason: full };
      this.running = false;
      this._status({ state: "failed", ...this.terminal });
      return;
    }
    let delayMs = 0;
    const next = this.transports[this.transports.indexOf(conn.transport) + 1];
    if (!conn.opened && conn.transport === "websocket" && next && !this.websocketOpened) {
      // No WebSocket of this client ever opened (a proxy may block them; one that opened before and fails
      // now is a server away, which the same transport outlasts): the next transport, at once.
      this.transport = next;
    } else if (clientGap) {
      this.attempt = 0;  // the server is healthy; only this connection's run of seqs is broken
    } else {
      const attempt = conn.welcome ? 0 : this.attempt;  // a welcomed connection worked: the count starts over
      // A draining pod (1001) is not overloaded: another pod can take the client at once.
      const ceiling = Math.min(this.options.maxDelayMs, this.options.initialDelayMs * 2 ** Math.min(attempt, 62));
      // A draining pod (1001) is not overloaded, nor is one that only found the token expired.
      delayMs = (code === 1001 || code === TOKEN_EXPIRED) && attempt === 0 ? 0 : Math.random() * ceiling;
      this.attempt = attempt + 1;
    }
    this._status({ state: "waiting", code, reason, delayMs, attempt: this.attempt });
    const reconnect = () => { this.retryTimer = setTimeout(() => { if (this.running) this._connect(); }, delayMs); };
    if (!refreshable) return reconnect();
    Promise.resolve().then(() => this.options.refreshToken()).then((token) => {
      this.token = token;
      if (this.running) reconnect();
    }, (error) => {
      this.terminal = { code, name: "token_expired", reason: `token refresh failed: ${error}` };
      this.running = false;
      this._status({ state: "failed", ...this.terminal });
    });
  }

  // -- persistence: session id, cursor and state together ---------------------------------------------------

  _save() {
    if (!this.storage || this.epoch === null) return;
    const saved = { v: PROTOCOL_VERSION, session: this.sessionId, epoch: this.epoch, seq: this.lastSeq,
      digest: this.digest, items: Object.fromEntries(this.state) };
    if (this.view !== null) saved.view = this.view;
    try {
      this.storage.setItem(this.storageKey, JSON.stringify(saved));
    } catch {  // over quota: a later page starts from a snapshot, not from an older position
      try { this.storage.removeItem(this.storageKey); } catch { /* storage unusable */ }
    }
  }

  _restore() {
    try {
      const saved = JSON.parse(this.storage?.getItem(this.storageKey) ?? "null");
      if (saved === null) return false;
      const f = (name, kind) => field(saved, "saved", name, kind);
      if (saved.v !== PROTOCOL_VERSION || !SESSION_ID.test(f("session", "string"))) return false;
      const items = Object.entries(f("items", "object")).map(([key, raw]) => [key, stateItem(raw, "saved item")]);
      [this.epoch, this.lastSeq, this.sessionId] = [f("epoch", "string"), f("seq", "count"), saved.session];
      this.digest = optionalDigest(saved, "saved") ?? null;
      this.view = typeof saved.view === "string" && DIGEST.test(saved.view) ? saved.view : null;
      this.state = new Map(items);
      return true;
    } catch {
      return false;  // unreadable: start without a position (a snapshot)
    }
  }
}

/**
 * What a UI renders from `client`: `getSnapshot()` is a view {client, state, cursor, status, terminal} (state:
 * a copy of client.state; status: the last one told) that stays the same object until the client changes and
 * is a new one after; `subscribe(onChange)` is told of changes, at most once per microtask (the entries of one
 * frame are one change), and returns its unsubscribe. React's useSyncExternalStore takes both as they are
 * (sparkwire-client/react); Vue's useSparkwire copies views into refs (sparkwire-client/vue). `close()` stops
 * listening to the client.
 */
export function createClientStore(client) {
  let status = null;
  let dirty = true;
  let queued = false;
  let view;
  const subscribers = new Set();
  const changed = () => {
    dirty = true;
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; for (const subscriber of [...subscribers]) safely(subscriber); });
  };
  const onStatus = (next) => { status = next; changed(); };
  const removers = [client.on("entry", changed), client.on("snapshot", changed), client.on("status", onStatus),
    client.on("removal", changed)];
  return {
    getSnapshot() {
      if (dirty) {
        dirty = false;
        view = Object.freeze({ client, state: new Map(client.state), cursor: client.cursor, status,
          terminal: client.terminal });
      }
      return view;
    },
    subscribe(onChange) {
      subscribers.add(onChange);
      return () => { subscribers.delete(onChange); };
    },
    close() {
      for (const remove of removers) remove();
      subscribers.clear();
    },
  };
}
