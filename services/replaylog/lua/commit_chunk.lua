-- commit_chunk.lua: append one chunk of one Spark micro-batch to a stream's replay log, exactly once.
--
-- A chunk is identified by (query id, batch id, chunk index). The meta hash remembers the last chunk
-- committed; a chunk at or before that marker is a replay (the driver died after the commit but before
-- Spark recorded the batch) and writes nothing. Within a new chunk, every processingId already in the
-- ids record is skipped and counted; the others get the next seqs. All of it happens in one script call,
-- so a reader never sees part of a chunk and the marker never disagrees with the log.
--
-- KEYS[1]  log    stream of committed results, entry id "<seq>-0", fields pid, key, data, ts, batch
-- KEYS[2]  meta   hash: epoch, created_ms, first_seq, last_seq, query_id, last_batch, last_chunk,
--                 last_commit_ms, records_committed, duplicates_suppressed, chunks_replayed,
--                 batches_committed, query_changes
-- KEYS[3]  state  hash: result key -> {"seq":N,"processingId":"...","data":<payload>} (latest per key)
-- KEYS[4]  ids    sorted set: processingId scored by its seq, trimmed together with the log
--
-- ARGV[1]  query id      Spark streaming query id (stable across restarts on one checkpoint)
-- ARGV[2]  batch id      Spark batchId, integer >= 0
-- ARGV[3]  chunk index   0-based position of this chunk in the batch
-- ARGV[4]  chunk count   number of chunks the batch was split into
-- ARGV[5]  epoch         candidate epoch; used only when the stream has none yet
-- ARGV[6]  retention     number of entries (and ids) to keep, > 0
-- ARGV[7..] records      triples: processingId, key, payload (payload is a JSON document)
--
-- Returns {status, epoch, first_seq, last_seq, appended, duplicates}
--   status "committed": the chunk was applied; first_seq..last_seq are the seqs it was given
--                       (first_seq > last_seq when every record was a duplicate or the chunk was empty)
--   status "replayed":  the chunk was committed before; nothing was written

local log, meta, state, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local query_id = ARGV[1]
local batch = tonumber(ARGV[2])
local chunk = tonumber(ARGV[3])
local chunk_count = tonumber(ARGV[4])
local retention = tonumber(ARGV[6])

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then
  epoch = ARGV[5]
  redis.call('HSET', meta, 'epoch', epoch, 'created_ms', now_ms, 'first_seq', 1, 'last_seq', 0)
end

-- A new checkpoint (new query id) restarts batch ids at 0: forget the old marker, keep id-level dedup.
local known_query = redis.call('HGET', meta, 'query_id')
if known_query ~= query_id then
  if known_query then
    redis.call('HINCRBY', meta, 'query_changes', 1)
  end
  redis.call('HSET', meta, 'query_id', query_id, 'last_batch', -1, 'last_chunk', -1)
end

local last_seq = tonumber(redis.call('HGET', meta, 'last_seq'))
local last_batch = tonumber(redis.call('HGET', meta, 'last_batch'))
local last_chunk = tonumber(redis.call('HGET', meta, 'last_chunk'))
if batch < last_batch or (batch == last_batch and chunk <= last_chunk) then
  redis.call('HINCRBY', meta, 'chunks_replayed', 1)
  return {'replayed', epoch, last_seq + 1, last_seq, 0, 0}
end

local seq = last_seq
local appended, duplicates = 0, 0
for i = 7, #ARGV, 3 do
  local pid, key, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('ZSCORE', ids, pid) then
    duplicates = duplicates + 1
  else
    seq = seq + 1
    redis.call('XADD', log, seq .. '-0', 'pid', pid, 'key', key, 'data', payload, 'ts', now_ms, 'batch', batch)
    redis.call('ZADD', ids, seq, pid)
    -- payload is embedded as JSON, not re-quoted, so a snapshot decodes in one pass
    redis.call('HSET', state, key,
      '{"seq":' .. seq .. ',"processingId":' .. cjson.encode(pid) .. ',"data":' .. payload .. '}')
    appended = appended + 1
  end
end

redis.call('HSET', meta, 'last_seq', seq, 'last_batch', batch, 'last_chunk', chunk, 'last_commit_ms', now_ms)
redis.call('HINCRBY', meta, 'records_committed', appended)
redis.call('HINCRBY', meta, 'duplicates_suppressed', duplicates)
if chunk == chunk_count - 1 then
  redis.call('HINCRBY', meta, 'batches_committed', 1)
end

local floor_seq = seq - retention
if floor_seq > 0 then
  redis.call('XTRIM', log, 'MINID', (floor_seq + 1) .. '-0')
  redis.call('ZREMRANGEBYSCORE', ids, '-inf', floor_seq)
  redis.call('HSET', meta, 'first_seq', floor_seq + 1)
end

return {'committed', epoch, last_seq + 1, seq, appended, duplicates}
