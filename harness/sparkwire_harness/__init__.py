"""sparkwire's test harness, apart from the product: what tests, benchmarks, ``make demo`` and ``make chaos`` run
sparkwire with and check it against.

- ``stack``: the local stack of real processes (Redis with replicas and Sentinels, a Kafka broker or cluster,
  gateway processes behind nginx, a committer), each on a free port, ready-waited, its log kept.
- ``chaos``: the whole pipeline under a seeded fault schedule (``sparkwire-harness chaos``, the harness's own
  command), browser and Python clients.
- ``verify``: the independent oracle (expected windows from the produced events) and the comparison.
- ``demo``: ``make demo``.
"""
