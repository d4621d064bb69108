// Types of sparkwire-client.js, the browser (and Node) client of the sparkwire gateway protocol v1
// (docs/protocol.md). Kept beside the module it describes; `npm test` type-checks consumers against it.
//
// `T` is the type of the stream's results (an entry's and a state item's `data`): what the aggregator commits,
// as the page knows it. The client does not check it at run time; it defaults to `unknown`.

export declare const PROTOCOL_VERSION: 1;

/** Close code -> [name, resumable]: the protocol's table of close codes (docs/protocol.md). */
export declare const CLOSE_CODES: Readonly<Record<number, readonly [name: string, resumable: boolean]>>;

/** Whether to reconnect and resume after `code`; unknown codes count as resumable. */
export declare function isResumable(code: number): boolean;

/** One committed result, applied once in seq order. */
export interface Entry<T = unknown> {
  seq: number;
  processingId: string;
  key: string;
  data: T;
  commitMs: number;
  /** The entry's digest (16 hex digits); absent from a server older than digests. */
  digest?: string;
}

/** The latest result of one key. */
export interface StateItem<T = unknown> {
  seq: number;
  processingId: string;
  data: T;
}

/** The last entry applied: `seq` within `epoch`, and its digest when the server sent one (docs/protocol.md,
 * "Continuity": a gateway resumes a cursor with a digest only where the log still holds that entry). */
export interface Cursor {
  epoch: string;
  seq: number;
  digest?: string;
  /** A filtered subscription's view (the welcome's) the position was covered under; absent when unfiltered. */
  view?: string;
}

/** A value a filter compares with: never null (use `isNull`). */
export type FilterScalar = string | number | boolean;

/** A field's condition as operators, ANDed (docs/protocol.md, "The filter form"). */
export interface FilterOperators {
  eq?: FilterScalar;
  in?: FilterScalar[];
  lt?: number;
  le?: number;
  gt?: number;
  ge?: number;
  isNull?: boolean;
}

/** A scalar (equality) or operators. */
export type FilterCondition = FilterScalar | FilterOperators;

/** Field (a top-level field of the result, or "$key") -> condition; all ANDed; `{}` admits every result. */
export type Filter = Record<string, FilterCondition>;

/** A key whose newest revision stopped matching the filter (update mode): dropped from the state, once. */
export interface Removal {
  seq: number;
  key: string;
  removed: true;
}

/** A filter the client refuses before any connection (the server would close with 4422). */
export declare class FilterError extends Error {}

/** `filter` checked against the filter form enough to fail early (FilterError naming the part); a copy. */
export declare function checkFilter(filter: unknown): Filter;

export interface Welcome {
  type: "welcome";
  session: string;
  epoch: string;
  headSeq: number;
  recovered: boolean;
  reset: string | null;
  ackEvery: number;
  ackIntervalMs: number;
  /** A filtered subscription's view id (16 hex digits); absent when unfiltered. */
  view?: string;
}

export type ServerFrame =
  | Welcome
  | { type: "snapshot"; epoch: string; seq: number; items: Map<string, StateItem>; more: boolean; digest?: string }
  | { type: "entries"; epoch: string; entries: Entry[] }
  /** A filtered `entries` frame (one with `after`): every item of the view in (after, through]; none: a position. */
  | { type: "viewEntries"; epoch: string; after: number; through: number; digest: string; items: (Entry | Removal)[] }
  | { type: "error"; code: number; name: string; reason: string }
  | { type: "acks"; ackEvery: number; ackIntervalMs: number }
  | { type: "ping" | "pong"; t: number }
  | { type: "unknown"; name: string };

/** A server frame this client cannot make sense of. */
export declare class FrameError extends Error {}

/** One server frame, checked enough that a malformed one cannot corrupt a client's state. */
export declare function parseFrame(text: unknown): ServerFrame;

/** Remembers the last `capacity` processingIds seen. */
export declare class Deduper {
  constructor(capacity: number);
  readonly capacity: number;
  duplicates: number;
  /** True if `id` was seen (and is still remembered); records it either way. */
  isDuplicate(id: string): boolean;
}

export interface Status {
  state: "connecting" | "open" | "waiting" | "stopped" | "failed";
  code?: number;
  reason?: string;
  delayMs?: number;
  attempt?: number;
  recovered?: boolean;
  reset?: string | null;
}

export interface SnapshotInfo {
  epoch: string;
  seq: number;
  /** Why the state was replaced: "no_position", "restored", "unannounced", or the welcome's reset. */
  reason: string;
}

/** Where the client saves its session and cursor (localStorage by default). */
export interface ClientStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** What `new WebSocket(url)` gives, as far as the client uses it. */
export interface SocketLike {
  readonly readyState: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror?: ((event: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export interface SparkwireClientOptions<T = unknown> {
  /** The stream to follow. */
  stream: string;
  /** The gateway's WebSocket URL; default `/ws` on the page's host (required where there is no page). */
  url?: string;
  /** A JWT, sent in the hello (never in the URL). */
  token?: string | null;
  /** Called when the server closes with 4419 (token expired); the client resumes at once with its answer. */
  refreshToken?: () => Promise<string>;
  onEntry?: (entry: Entry<T>) => void;
  onSnapshot?: (state: Map<string, StateItem<T>>, info: SnapshotInfo) => void;
  onStatus?: (status: Status) => void;
  /** A key that stopped matching `filter` was dropped from the state (once; update mode). */
  onRemoval?: (removal: Removal) => void;
  /** Only the results matching this filter (docs/protocol.md, "Filtered subscriptions"); checked at once
   *  (FilterError); the server's 4422 (invalid_filter) / 4423 (outside_scope) stop the client with its reason. */
  filter?: Filter | null;
  initialDelayMs?: number;
  maxDelayMs?: number;
  dedupCapacity?: number;
  silenceTimeoutMs?: number;
  /** Default localStorage; null: nothing saved. */
  storage?: ClientStorage | null;
  /** The constructor to open connections with; default the global WebSocket. */
  WebSocket?: new (url: string) => SocketLike;
  /** Default ["websocket", "sse"]: Server-Sent Events when no WebSocket of the client has ever opened. */
  transports?: Transport[];
  /** The gateway's SSE URL; default `sse` beside `url`. */
  sseUrl?: string;
  /** For SSE; default the global fetch. */
  fetch?: typeof fetch;
}

export type Transport = "websocket" | "sse";

/** The protocol over Server-Sent Events (`POST /sse`, frames to `POST /sse/frames`), as a SocketLike. */
export declare class SseSocket implements SocketLike {
  constructor(url: string, options?: { fetch?: typeof fetch; affinity?: string });
  readonly url: string;
  readonly readyState: number;
  /** The connection the gateway named (X-Sparkwire-Connection); null until its answer began. */
  readonly connection: string | null;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export interface Terminal {
  code: number;
  name: string;
  reason: string;
}

export interface ClientStats {
  connects: number;
  reconnects: number;
  connectionFailures: number;
  duplicates: number;
  gaps: number;
  resets: Record<string, number>;
  framesReceived: number;
  acksSent: number;
  unknownFrames: number;
  closes: Record<number, number>;
  terminal: Terminal | null;
  cursor: Cursor | null;
  sessionId: string;
  /** The transport in use (or the next connection's). */
  transport: Transport;
  /** Keys a removal took out of the state. */
  removals: number;
}

/** A position read elsewhere (GET /history) to start after. */
export interface Position<T = unknown> {
  epoch: string;
  seq: number;
  items?: Record<string, StateItem<T>>;
  /** The digest of the entry at `seq` (GET /history's last entry's), so the resume proves continuity. */
  digest?: string;
  /** GET /history's `view` when it was read with the client's filter (or a scoped token). */
  view?: string;
}

/** What `on` and `off` take: each event's listener, called as the constructor's callback of that event. */
export interface ClientEvents<T = unknown> {
  entry: (entry: Entry<T>) => void;
  snapshot: (state: Map<string, StateItem<T>>, info: SnapshotInfo) => void;
  status: (status: Status) => void;
  removal: (removal: Removal) => void;
}

/** Every entry of one stream applied once, in seq order, across dropped connections and reconnects. */
export declare class SparkwireClient<T = unknown> {
  constructor(options: SparkwireClientOptions<T>);
  readonly url: string;
  readonly sessionId: string;
  /** key -> latest item. */
  state: Map<string, StateItem<T>>;
  terminal: Terminal | null;
  /** The subscription's filter (a checked copy of the option); null: every result. */
  readonly filter: Filter | null;
  /** The view the cursor's position was covered under; null: unfiltered. */
  readonly view: string | null;
  get cursor(): Cursor | null;
  get welcome(): Welcome | null;
  get duplicates(): number;
  stats(): ClientStats;
  start(): void;
  /** Start after `position` instead of from a snapshot; returns whether it was taken. */
  startAfter(position: Position<T>): boolean;
  /** Close normally after a last ack; no reconnect. */
  stop(): void;
  /** Calls `listener` on every `event` from now on, after the constructor's callback; returns its remover. */
  on<E extends keyof ClientEvents<T>>(event: E, listener: ClientEvents<T>[E]): () => void;
  /** Removes `listener` from `event`'s listeners. */
  off<E extends keyof ClientEvents<T>>(event: E, listener: ClientEvents<T>[E]): void;
}

/** One event of a `text/event-stream`. */
export interface StreamEvent {
  /** The `event` field; "message" without one. */
  type: string;
  /** The `data` lines, joined with "\n". */
  data: string;
  /** The last `id` as of this event ("" when none came). */
  lastEventId: string;
}

/** A `text/event-stream` read as the WHATWG HTML standard says, chunk by chunk. */
export declare class EventStreamParser {
  constructor();
  /** The last event ID as of the last dispatch. */
  readonly lastEventId: string;
  /** The reconnection time (ms) the stream last asked for (`retry:`); null while none. */
  readonly retry: number | null;
  /** Reads a chunk of decoded text; returns the events it completed, in order. */
  push(chunk: string): StreamEvent[];
  /** The stream ended: discards an event not closed by an empty line. */
  end(): void;
}

/** What a UI renders: a new object after each change of the client, the same one otherwise. */
export interface ClientView<T = unknown> {
  /** null while there is none (the hooks' options are null). */
  client: SparkwireClient<T> | null;
  /** A copy of client.state as of this view. */
  state: ReadonlyMap<string, StateItem<T>>;
  cursor: Cursor | null;
  /** The last status the client told; null before the first. */
  status: Status | null;
  terminal: Terminal | null;
}

/** A client as an external store (React's useSyncExternalStore takes `subscribe` and `getSnapshot`). */
export interface ClientStore<T = unknown> {
  getSnapshot(): ClientView<T>;
  /** `onChange` is told of changes, at most once per microtask; returns its unsubscribe. */
  subscribe(onChange: () => void): () => void;
  /** Stops listening to the client. */
  close(): void;
}

export declare function createClientStore<T>(client: SparkwireClient<T>): ClientStore<T>;
