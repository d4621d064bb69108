-- publish_batch.lua: make one fully staged Spark micro-batch visible: append its records to the log, the
-- state and the ids in one call and move the batch marker. Readers see all of the batch at once, or none.
--
-- Publishing is deterministic: the seqs follow the log's last_seq, the records come from the staging hash
-- in chunk order, the commit time was fixed at staging. Publishing the same staged batch again on a
-- replica promoted before it received the first publish therefore writes exactly the same entries.
--
-- Within the batch, every processingId already in the ids record is skipped and counted; the others get
-- the next seqs.
--
-- KEYS[1]  log      stream of committed results, entry id "<seq>-0", fields pid, key, data, ts, batch
-- KEYS[2]  meta     hash: epoch, created_ms, first_seq, last_seq, query_id, last_batch, last_chunk,
--                   last_commit_ms, records_committed, duplicates_suppressed, batches_committed,
--                   query_changes, publishes_replayed (and the counters stage_chunk.lua keeps)
-- KEYS[3]  state    hash: result key -> {"seq":N,"processingId":"...","data":<payload>} (latest per key)
-- KEYS[4]  ids      sorted set: processingId scored by its seq, trimmed together with the log
-- KEYS[5]  staging  hash written by stage_chunk.lua (see there)
--
-- ARGV[1]  query id      Spark streaming query id
-- ARGV[2]  batch id      Spark batchId, integer >= 0
-- ARGV[3]  (unused)      kept so the argument positions stay those of stage_chunk.lua
-- ARGV[4]  chunk count   number of chunks the batch was split into
-- ARGV[5]  epoch         candidate epoch; used only when the stream has none yet
-- ARGV[6]  retention     number of entries (and ids) to keep, > 0
-- ARGV[7]  fence         '' for none; otherwise the epoch the writer last saw (as in stage_chunk.lua)
--
-- Returns {status, epoch, first_seq, last_seq, appended, duplicates}
--   status "committed": the whole batch was appended; first_seq..last_seq are the seqs it was given
--                       (first_seq > last_seq when every record was a duplicate or it was empty)
--   status "replayed":  the batch was published before; nothing was written
--   status "restage":   the batch is not (all) staged: Redis lost the staging hash (a restart without AOF,
--                       a failover to a replica that lacked it); stage it again
--   status "fenced":    the stream's epoch is not the fence; "epoch" is the stream's ('' for none)
-- "epoch" is empty while the stream has none (nothing was ever appended).

local log, meta, state, ids, staging = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local query_id = ARGV[1]
local batch = tonumber(ARGV[2])
local chunk_count = tonumber(ARGV[4])
local retention = tonumber(ARGV[6])
local fence = ARGV[7]

-- Spliced in when loaded (replaylog/scripts.py): the stream's position and the fence check as every writing
-- script has them (fence.lua), and the steps a commit shares with commit_rows.lua (commit.lua).
--@include fence.lua
--@include commit.lua

local known_query = redis.call('HGET', meta, 'query_id')
if known_query == query_id and batch <= tonumber(redis.call('HGET', meta, 'last_batch')) then
  -- A write, on purpose: the writer's WAIT after this call then covers the first publish too, whose reply
  -- was lost (WAIT counts the writes of the connection it is sent on).
  redis.call('HINCRBY', meta, 'publishes_replayed', 1)
  return unchanged('replayed')
end
local staged = redis.call('HMGET', staging, 'query', 'batch', 'count', 'next', 'ts')
if not (staged[1] == query_id and tonumber(staged[2]) == batch and tonumber(staged[3]) == chunk_count
    and tonumber(staged[4]) == chunk_count) then
  return unchanged('restage')
end
local commit_ms = staged[5]

if epoch == '' then
  epoch = ARGV[5]
  redis.call('HSET', meta, 'epoch', epoch, 'created_ms', commit_ms, 'first_seq', 1, 'last_seq', 0)
end
adopt_query(meta, known_query, query_id)

local seq = last_seq
local appended, duplicates = 0, 0
for c = 0, chunk_count - 1 do
  local records = cmsgpack.unpack(redis.call('HGET', staging, 'c' .. c))
  for i = 1, #records, 3 do
    local pid, key, payload = records[i], records[i + 1], records[i + 2]
    if redis.call('ZSCORE', ids, pid) then
      duplicates = duplicates + 1
    else
      seq = seq + 1
      redis.call('XADD', log, seq .. '-0', 'pid', pid, 'key', key, 'data', payload, 'ts', commit_ms, 'batch', batch)
      index_entry(ids, state, seq, pid, key, payload)
      appended = appended + 1
    end
  end
end
redis.call('DEL', staging)

redis.call('HSET', meta, 'last_seq', seq, 'last_batch', batch, 'last_chunk', chunk_count - 1,
  'last_commit_ms', commit_ms)
count_and_trim(log, meta, ids, seq, retention, appended, duplicates, 'batches_committed')

return {'committed', epoch, last_seq + 1, seq, appended, duplicates}
