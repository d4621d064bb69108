"""What makes a result DataFrame impossible to deliver exactly once, found in its analyzed plan before the
query starts (so nothing is ever written for it):

* a batch DataFrame (there is nothing to stream);
* a key or id column computed by a non-deterministic expression (``rand()``, ``uuid()``, a non-deterministic
  UDF, ``monotonically_increasing_id()``...): a re-run batch would give its results other ids, and the
  log would hold them twice;
* a streaming aggregation without a watermark: its state never ends, update mode would revise results
  forever and append mode cannot emit at all (Spark refuses that one too, but only at ``start()``).

The plan is walked through py4j (``org.apache.spark.sql.catalyst.plans.logical.LogicalPlan``); the walk
is pure logic over nodes' classes, expressions and expression ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sparkwire.spark.stream import DeliveryError, StreamSpec


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _nodes(plan: Any) -> Iterator[Any]:
    """Pre-order: a node before its children, so an attribute is met where it is made before below it."""
    yield plan
    for child in _seq(plan.children()):
        yield from _nodes(child)


def _class(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _expr_id(expression: Any) -> int | None:
    try:
        return int(expression.exprId().id())
    except Exception:  # not a NamedExpression
        return None


def nondeterministic_sources(plan: Any, columns: list[str]) -> list[str]:
    """The SQL of every non-deterministic expression that the output ``columns`` of ``plan`` derive from."""
    wanted = {_expr_id(attribute) for attribute in _seq(plan.output()) if str(attribute.name()) in columns}
    wanted.discard(None)
    found: list[str] = []
    for node in _nodes(plan):
        for expression in _seq(node.expressions()):
            if _expr_id(expression) not in wanted:
                continue
            if not expression.deterministic():
                found.append(str(expression.sql()))
            wanted.update(int(ref.exprId().id()) for ref in _seq(expression.references().toSeq()))
    return found


def _has_node(plan: Any, *names: str) -> bool:
    return any(_class(node) in names for node in _nodes(plan))


def check_deliverable(frame: Any, spec: StreamSpec) -> None:
    """Raise :class:`DeliveryError` for what cannot be delivered exactly once (the module's list)."""
    if not frame.isStreaming:
        raise DeliveryError("deliver() needs a streaming DataFrame (spark.readStream...); this one is a batch "
                            "DataFrame")
    plan = frame._jdf.queryExecution().analyzed()
    for role, columns in (("key", list(spec.keys)), ("id", list(spec.id_columns))):
        sources = nondeterministic_sources(plan, columns)
        if sources:
            raise DeliveryError(
                f"the {role} column(s) {columns} depend on non-deterministic expressions ({'; '.join(sources)}): "
                "a re-run micro-batch would give its results different identities, so they cannot be delivered "
                "exactly once; derive them from the data (e.g. the window and the grouping columns)")
    if _has_node(plan, "Aggregate", "FlatMapGroupsWithState", "TransformWithState") and not _has_node(
            plan, "EventTimeWatermark"):
        raise DeliveryError(
            f"{spec.mode} mode needs a watermark on a streaming aggregation (withWatermark on the event time "
            "before grouping): without one its state grows forever and results are never final")
