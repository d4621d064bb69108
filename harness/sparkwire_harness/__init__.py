"""sparkwire's test harness, apart from the product: what tests, benchmarks, ``make demo`` and ``make chaos`` run
sparkwire with and check it against.

- ``stack``: the local stack of real processes (Redis with replicas and Sentinels, a Kafka broker or cluster,
  gateway processes behind nginx, a committer), each on a free port, ready-waited, its log kept.
- ``chaos``: the whole pipeline under a seeded fault schedule (``sparkwire-harness chaos``, the harness's own
  command), browser and Python clients.
- ``verify``: the independent oracle (expected windows from the produced events) and the comparison.
- ``e2e``: what both end-to-end suites share: faults in the background, clients run until caught up, each
  client's connection journal.
- ``kind``: the kind suite's library (tests/e2e/kind): the cluster and the release through kubectl and helm,
  port-forwards, the Redis link, producer Jobs, node loss and the replicated Redis's Sentinels.
- ``demo``: ``make demo``.
"""
