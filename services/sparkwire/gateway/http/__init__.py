"""The gateway's plain HTTP endpoints: the reads (``snapshot``, ``history``, ``streams`` with ``/descriptor``)
behind the hello's token as a bearer header (``bearer``), the probes and metrics (``probes``), and the
dashboard page with its scripts (``pages``)."""
