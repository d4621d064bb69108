"""Results: what a query's result rows become, and which results cannot be delivered exactly once.

* ``checks.py``: what is refused in the query's plan before it starts (a non-deterministic id, no watermark);
* ``encoding.py``: rows of any Spark schema -> JSON payloads, losslessly (and the schemas refused);
* ``records.py``: one micro-batch of rows -> the records the replay log commits (ids, revisions, order).

Internal: what a job needs is exported by ``sparkwire.spark``.
"""
