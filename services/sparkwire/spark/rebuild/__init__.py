"""Rebuild: a lost replay log recomputed from Kafka and the query's checkpoint.

* ``checkpoint.py``: what Spark's checkpoint says about past batches (their Kafka ranges and watermarks);
* ``plan.py``: which part of the lost log can be recomputed exactly (pure);
* ``recompute.py``: the user's query run again as a Spark batch job over those ranges;
* ``rebuilder.py``: :class:`HistoryRebuilder`, which does all of it and commits the results, fenced on an epoch.

Internal: what a job needs is exported by ``sparkwire.spark``.
"""
