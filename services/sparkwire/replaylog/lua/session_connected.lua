-- session_connected.lua: a client's session marked connected on a pod, and its time to live set, in one call.
--
-- One command per handshake where HSET and EXPIRE were two: when thousands of clients connect to a pod at
-- once (a deploy, a pod lost), its CPU goes per command sent and answered (replaylog/sessions.py).
-- Its one key is the session's own (hash-tagged by session id), so it runs on a Redis Cluster as well.
--
-- KEYS[1]  session hash   pod, connected_ms, stream, subject; its acks' fields are written by the flush
-- ARGV[1]  pod            the pod the client connected to
-- ARGV[2]  connected_ms   when, in ms since the Unix epoch
-- ARGV[3]  stream         the stream the session reads
-- ARGV[4]  subject        the token's subject ("" without auth): who may adopt the session
-- ARGV[5]  ttl_seconds    how long the session outlives its last connection or ack
redis.call('HSET', KEYS[1], 'pod', ARGV[1], 'connected_ms', ARGV[2], 'stream', ARGV[3], 'subject', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 0
