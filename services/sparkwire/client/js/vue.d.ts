// Types of sparkwire-client/vue (vue.js): a Vue composable over the client.
import type { MaybeRefOrGetter, ShallowRef } from "vue";

import type { ClientView, Position, SparkwireClientOptions } from "./sparkwire-client.js";

/** The client's options and, instead of start(), a position to start after (client.startAfter). */
export interface UseSparkwireOptions<T = unknown> extends SparkwireClientOptions<T> {
  after?: Position<T>;
}

/** The client's view as shallow refs (read-only to the caller), and `stop`. */
export type SparkwireRefs<T = unknown> = {
  readonly [K in keyof ClientView<T>]: Readonly<ShallowRef<ClientView<T>[K]>>;
} & {
  /** Stops the client and stops following `options` (as unmounting the component does). */
  stop(): void;
};

/**
 * Follows a stream while the calling effect scope (a component's setup) lives and `options` (an object, a ref
 * or a getter) is not null. A change of stream, url, sseUrl, transports, token or filter makes another client.
 */
export declare function useSparkwire<T = unknown>(
  options: MaybeRefOrGetter<UseSparkwireOptions<T> | null | undefined>,
): SparkwireRefs<T>;
