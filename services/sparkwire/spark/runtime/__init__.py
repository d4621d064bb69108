"""Runtime: a delivery run as a driver process.

* ``main.py``: ``main(job)``, the ``run`` and ``rebuild`` commands of a job file, and serving queries until a
  signal;
* ``session.py``: the SparkSession a job runs in;
* ``class_archive.py``: a class-data-sharing archive so that a local driver starts sooner
  (``python -m sparkwire.spark.runtime.class_archive``);
* ``progress.py``: Spark's query progress as structured logs and Prometheus counters.

Internal: what a job needs is exported by ``sparkwire.spark``.
"""
