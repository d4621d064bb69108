// A React component using sparkwire-client/react, type-checked with @types/react: the hook's view is typed by
// the stream's results.
import { useState } from "react";
import { useSparkwire } from "sparkwire-client/react";
import type { Entry } from "sparkwire-client";

interface Order {
  customer: string;
  total: number;
}

export function Orders({ token }: { token: string | null }) {
  const [last, setLast] = useState<string | null>(null);
  const { state, status, cursor, terminal, client } = useSparkwire<Order>(token ? {
    stream: "orders",
    token,
    onEntry: (entry) => setLast(`${entry.data.customer}: ${entry.data.total.toFixed(2)}`),
    after: { epoch: "e", seq: 0 },
  } : null);
  if (terminal) return <p>stopped: {terminal.name}</p>;
  return (
    <section>
      <p>{status?.state ?? "idle"} at {cursor?.seq ?? "-"} ({client?.stats().transport ?? "no client"}); last: {last}</p>
      <ul>{[...state].map(([key, item]) => <li key={key}>{item.data.customer}: {item.data.total.toFixed(2)}</li>)}</ul>
    </section>
  );
}

export function Untyped() {
  const { state } = useSparkwire({ stream: "metrics", onEntry: (entry: Entry<{ n: number }>) => entry.data.n });
  // Inferred from onEntry: the data is {n: number}.
  return <ol>{[...state.values()].map((item) => <li key={item.processingId}>{item.data.n}</li>)}</ol>;
}

export function TenantOrders({ tenant }: { tenant: string }) {
  // A filtered subscription: only this tenant's orders of at least 10; a removal drops a card.
  const [dropped, setDropped] = useState<string[]>([]);
  const { state, terminal } = useSparkwire<Order>({ stream: "orders", filter: { tenant, total: { ge: 10 } },
    onRemoval: (removal) => setDropped((keys) => [...keys, removal.key]) });
  if (terminal?.code === 4422 || terminal?.code === 4423) return <p>refused: {terminal.reason}</p>;
  return <p>{state.size} orders, {dropped.length} dropped</p>;
}

export function Wrong() {
  // @ts-expect-error: an Order has no `count`
  const total = [...useSparkwire<Order>({ stream: "orders" }).state.values()].map((item) => item.data.count);
  // @ts-expect-error: a stream is required
  useSparkwire<Order>({ token: "t" });
  // @ts-expect-error: a filter is an object of conditions, not a list
  useSparkwire<Order>({ stream: "orders", filter: ["tenant"] });
  return <p>{total}</p>;
}
