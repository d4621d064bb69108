-- mark_rebuild.lua: open a rebuild of a lost log in one call: the stream's new epoch (created here when
-- it has none, exactly as publish_batch.lua creates one, or when the log lost its tail) and what the
-- rebuild can and cannot restore.
--
-- A log that lost its tail (stage_chunk.lua's status "behind": a failover or a restore kept the epoch but
-- not the last published batches) keeps its entries but gets a new epoch here: clients that saw the lost
-- entries resync from a snapshot, and the seqs after the hole may hold other results than the ones they
-- saw, which only a new epoch makes legitimate. The rebuild then appends what is missing (ids already in
-- the log are skipped). The batch marker is dropped with the old epoch.
--
-- The aggregator calls it before committing any rebuilt batch, so every batch after it (rebuilt or live)
-- is fenced on the epoch it returns, and a reader that sees the new epoch also sees the marks: a log
-- whose history could not all be rebuilt (Kafka's retention deleted part of the input) says so from the
-- start, never silently. All values are integers (readers parse every non-position meta field as one).
--
-- KEYS[1]  meta     hash: epoch, created_ms, first_seq, last_seq (see publish_batch.lua), tail_losses
--                   (count of new epochs started here for a lost tail) and the marks:
--                   rebuilds (count), history_lost (1 once any history could not be rebuilt),
--                   history_lost_before_ms (windows starting at or before this event time may be missing),
--                   history_lost_records (Kafka records past retention, summed over rebuilds)
--
-- ARGV[1]  epoch          candidate epoch; used only when the stream has none yet
-- ARGV[2]  lost before    -1 when the whole history can be rebuilt; otherwise the event time (epoch ms) at
--                         or before which windows are lost
-- ARGV[3]  lost records   Kafka records of the rebuild's input that are past retention (0 with ARGV[2] -1)
-- ARGV[4]  lost tail of   '' for none; otherwise the epoch whose log lost its tail: when the stream still
--                         has that epoch, ARGV[1] replaces it (a second call finds it replaced: no-op)
--
-- Returns the stream's epoch.

local meta = KEYS[1]
local lost_before = tonumber(ARGV[2])
local lost_records = tonumber(ARGV[3])

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then
  epoch = ARGV[1]
  redis.call('HSET', meta, 'epoch', epoch, 'created_ms', now_ms, 'first_seq', 1, 'last_seq', 0)
elseif ARGV[4] ~= '' and epoch == ARGV[4] then
  epoch = ARGV[1]
  redis.call('HSET', meta, 'epoch', epoch, 'created_ms', now_ms)
  redis.call('HINCRBY', meta, 'tail_losses', 1)
  -- The marker that proved the loss would prove it again for the next live batch: the new epoch starts
  -- without one (the rebuild's and the live query's batches set it again).
  redis.call('HDEL', meta, 'query_id', 'last_batch', 'last_chunk')
end
redis.call('HINCRBY', meta, 'rebuilds', 1)
if lost_before >= 0 then
  local known = tonumber(redis.call('HGET', meta, 'history_lost_before_ms') or -1)
  redis.call('HSET', meta, 'history_lost', 1, 'history_lost_before_ms', math.max(known, lost_before))
  redis.call('HINCRBY', meta, 'history_lost_records', lost_records)
end
return epoch
