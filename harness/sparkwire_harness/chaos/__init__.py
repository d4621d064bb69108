"""``sparkwire-harness chaos``: the whole pipeline on real local processes under one seeded fault schedule, checked
end to end against results computed independently from the produced events.

``schedule`` (pure: which fault when, from the seed), ``toxiproxy`` (the fault proxy on every network
link), ``topology`` (the processes and links), ``faults`` (one injector per kind of fault), ``clients``
(the Python clients, many per process) and ``browser`` (the dashboard page in Chromium), ``monitor``
(progress samples and Prometheus scrapes while it runs), ``recovery`` and ``verifier`` (pure: recovery
times and the exactly-once verdict), ``run`` (the command).
"""

from __future__ import annotations
