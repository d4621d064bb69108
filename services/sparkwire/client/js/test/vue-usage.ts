// A Vue component using sparkwire-client/vue, type-checked with Vue's types: the refs are typed by the
// stream's results.
import { computed, defineComponent, h, ref } from "vue";
import { useSparkwire } from "sparkwire-client/vue";

interface Order {
  customer: string;
  total: number;
}

export default defineComponent({
  props: { token: { type: String, required: false } },
  setup(props) {
    const stream = ref("orders");
    const { state, status, cursor, terminal, client, stop } = useSparkwire<Order>(
      () => (props.token ? { stream: stream.value, token: props.token } : null));
    const total = computed(() => [...state.value.values()].reduce((sum, item) => sum + item.data.total, 0));
    // @ts-expect-error: the refs are read-only to the caller
    state.value = new Map();
    // @ts-expect-error: an Order has no `count`
    computed(() => [...state.value.values()].map((item) => item.data.count));
    return () => h("section", [
      h("p", `${status.value?.state ?? "idle"} at ${cursor.value?.seq ?? "-"}; ${terminal.value?.name ?? ""}`),
      h("p", `total ${total.value.toFixed(2)} (${client.value?.stats().transport ?? "no client"})`),
      h("button", { onClick: stop }, "stop"),
      h("ul", [...state.value].map(([key, item]) => h("li", { key }, `${item.data.customer}: ${item.data.total}`))),
    ]);
  },
});

// Options as a plain object too, and a position to start after.
useSparkwire<Order>({ stream: "orders", after: { epoch: "e", seq: 1 } });

// A filtered subscription: the filter is one of the options whose change makes another client.
const tenant = ref("acme");
useSparkwire<Order>(() => ({ stream: "orders", filter: { tenant: tenant.value }, onRemoval: (removal) => removal.key }));
