"""Large orders as a live feed, each delivered within milliseconds by Spark's real-time mode, exactly once
(``job.py``; its oracle ``expected.py``)."""
