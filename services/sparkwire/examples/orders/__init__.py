"""Revenue per region over sliding windows in update mode: ``job.py`` (the query and its delivery),
``produce.py`` (orders into Kafka, for the demo and tests), ``expected.py`` (every revision it must deliver,
computed without Spark)."""
