// Types of sparkwire-client/react (react.js): a React hook over the client. It needs no React types of its own.
import type { ClientView, Position, SparkwireClientOptions } from "./sparkwire-client.js";

/** The client's options and, instead of start(), a position to start after (client.startAfter). */
export interface UseSparkwireOptions<T = unknown> extends SparkwireClientOptions<T> {
  after?: Position<T>;
}

/**
 * Follows a stream while the component is mounted and `options` is not null; re-renders with the client's
 * view. A change of stream, url, sseUrl, transports, token or filter makes another client; the latest callbacks
 * are called.
 */
export declare function useSparkwire<T = unknown>(options: UseSparkwireOptions<T> | null | undefined): ClientView<T>;
