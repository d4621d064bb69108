"""Delivery: a streaming query's results into its replay-log stream, exactly once.

* ``deliver.py``: ``deliver`` / ``deliver_job`` / ``foreach_batch``, :class:`Target` and :class:`Job`: checks
  a query before it starts, then starts it with its sink;
* ``sink.py``: the ``foreachBatch`` sink, one micro-batch -> one atomic commit fenced on its batch id (and the
  loss of the log noticed, then rebuilt);
* ``faults.py``: crash points for fault-injection tests.

Internal: what a job needs is exported by ``sparkwire.spark``.
"""
