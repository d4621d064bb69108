"""The pod's own use of its store beside following the logs: client sessions (``session_store``), round trips
shared by callers that ask together (``batched``), and the Redis primary's replication as metrics
(``replication_watch``)."""
