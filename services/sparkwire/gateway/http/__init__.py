"""The gateway's plain HTTP endpoints: the reads (``snapshot``, ``history``, ``streams`` with ``/descriptor``)
behind the hello's token as a bearer header (``bearer``), ``snapshot`` and ``history`` in the view of their
``filter`` and the token's scope (``view_param``), the probes and metrics (``probes``), and the dashboard page
with its scripts (``pages``)."""
