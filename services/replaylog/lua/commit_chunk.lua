-- commit_chunk.lua: commit one chunk of one Spark micro-batch; the batch becomes visible exactly once,
-- all of it at the same time.
--
-- A batch too large for one call is cut into chunks. Every chunk but the last is only staged (kept in
-- the staging hash, invisible to readers); the last chunk appends the staged chunks and itself to the
-- log, the state and the ids in one call, and moves the batch marker. So a driver that dies between two
-- chunks leaves nothing a reader can see, and the re-run finds its earlier chunks staged.
--
-- A chunk is identified by (query id, batch id, chunk index). A chunk of a batch at or before the marker
-- (last_batch, last_chunk), or a chunk already staged, is a replay (the driver died after sending it)
-- and writes nothing. Within a batch being appended, every processingId already in the ids record is
-- skipped and counted; the others get the next seqs.
--
-- KEYS[1]  log      stream of committed results, entry id "<seq>-0", fields pid, key, data, ts, batch
-- KEYS[2]  meta     hash: epoch, created_ms, first_seq, last_seq, query_id, last_batch, last_chunk,
--                   last_commit_ms, records_committed, duplicates_suppressed, chunks_replayed,
--                   batches_committed, query_changes, batches_abandoned
-- KEYS[3]  state    hash: result key -> {"seq":N,"processingId":"...","data":<payload>} (latest per key)
-- KEYS[4]  ids      sorted set: processingId scored by its seq, trimmed together with the log
-- KEYS[5]  staging  hash: the chunks of the one batch not yet visible: query, batch, count, start, next
--                   (the next chunk index expected), c<i> (chunk i's records, MessagePack array of
--                   processingId, key, payload triples)
--
-- ARGV[1]  query id      Spark streaming query id (stable across restarts on one checkpoint)
-- ARGV[2]  batch id      Spark batchId, integer >= 0
-- ARGV[3]  chunk index   0-based position of this chunk in the batch
-- ARGV[4]  chunk count   number of chunks the batch was split into
-- ARGV[5]  epoch         candidate epoch; used only when the stream has none yet
-- ARGV[6]  retention     number of entries (and ids) to keep, > 0
-- ARGV[7]  fence         '' for none; otherwise the epoch the writer last saw: the chunk is refused
--                        (status "fenced", nothing written) unless the stream has exactly that epoch, so a
--                        writer never appends into a log that was lost and started over behind its back
-- ARGV[8..] records      triples: processingId, key, payload (payload is a JSON document)
--
-- Returns {status, epoch, first_seq, last_seq, appended, duplicates}
--   status "committed": the last chunk: the whole batch was appended; first_seq..last_seq are the seqs it
--                       was given (first_seq > last_seq when every record was a duplicate or it was empty)
--   status "staged":    the chunk was staged; nothing is visible yet
--   status "replayed":  the chunk was committed or staged before; nothing was written
--   status "restage":   the staged chunks this one follows are missing (Redis lost them, or a new query
--                       started staging); nothing was written: send the batch again from its first chunk
--   status "fenced":    the stream's epoch is not the fence (ARGV[7]); nothing was written; "epoch" is the
--                       stream's ('' when it has none: the log and its meta are gone)
-- "epoch" is empty while the stream has none (nothing was ever appended).

local log, meta, state, ids, staging = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local query_id = ARGV[1]
local batch = tonumber(ARGV[2])
local chunk = tonumber(ARGV[3])
local chunk_count = tonumber(ARGV[4])
local retention = tonumber(ARGV[6])

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local epoch = redis.call('HGET', meta, 'epoch') or ''
local last_seq = tonumber(redis.call('HGET', meta, 'last_seq') or 0)
local fence = ARGV[7]

-- First of all: a writer that saw another epoch must not write into this one (it would append its batch
-- before the history that was lost, and a new epoch created by its batch would hide the loss).
if fence ~= '' and fence ~= epoch then
  return {'fenced', epoch, last_seq + 1, last_seq, 0, 0}
end

-- The marker belongs to one query: a new checkpoint restarts batch ids at 0, so another query's marker
-- says nothing about this batch (id-level dedup still applies when it is appended).
local known_query = redis.call('HGET', meta, 'query_id')
local last_batch, last_chunk = -1, -1
if known_query == query_id then
  last_batch = tonumber(redis.call('HGET', meta, 'last_batch'))
  last_chunk = tonumber(redis.call('HGET', meta, 'last_chunk'))
end

local function unchanged(status)
  return {status, epoch, last_seq + 1, last_seq, 0, 0}
end

if batch < last_batch or (batch == last_batch and chunk <= last_chunk) then
  redis.call('HINCRBY', meta, 'chunks_replayed', 1)
  return unchanged('replayed')
end

-- Chunks before `start` are in the log already: a batch the previous version of this script left
-- half-appended (it appended chunk by chunk) is finished by staging only the rest.
local start = 0
if batch == last_batch then
  start = last_chunk + 1
end

local staged = redis.call('HMGET', staging, 'query', 'batch', 'count', 'start', 'next')
local same = staged[1] == query_id and tonumber(staged[2]) == batch and tonumber(staged[3]) == chunk_count
  and tonumber(staged[4]) == start
local next_chunk = start
if same then
  next_chunk = tonumber(staged[5])
end

if chunk < next_chunk then
  redis.call('HINCRBY', meta, 'chunks_replayed', 1)
  return unchanged('replayed')
end
if chunk > next_chunk then
  return unchanged('restage')
end

-- Whatever else is staged belongs to a batch that will never be finished: a new query id (new
-- checkpoint) started over, or the chunking changed. Dropping it is safe: its results are recomputed.
local abandoned = (not same) and redis.call('EXISTS', staging) == 1
if abandoned then
  redis.call('HINCRBY', meta, 'batches_abandoned', 1)
  redis.call('DEL', staging)
end

if chunk < chunk_count - 1 then
  if not same then
    redis.call('HSET', staging, 'query', query_id, 'batch', batch, 'count', chunk_count, 'start', start)
  end
  local records = {}
  for i = 8, #ARGV do
    records[#records + 1] = ARGV[i]
  end
  redis.call('HSET', staging, 'c' .. chunk, cmsgpack.pack(records), 'next', chunk + 1)
  return unchanged('staged')
end

-- The last chunk: the whole batch becomes visible now.
if epoch == '' then
  epoch = ARGV[5]
  redis.call('HSET', meta, 'epoch', epoch, 'created_ms', now_ms, 'first_seq', 1, 'last_seq', 0)
end
if known_query ~= query_id then
  if known_query then
    redis.call('HINCRBY', meta, 'query_changes', 1)
  end
  redis.call('HSET', meta, 'query_id', query_id)
end

local seq = last_seq
local appended, duplicates = 0, 0
local function append(pid, key, payload)
  if redis.call('ZSCORE', ids, pid) then
    duplicates = duplicates + 1
    return
  end
  seq = seq + 1
  redis.call('XADD', log, seq .. '-0', 'pid', pid, 'key', key, 'data', payload, 'ts', now_ms, 'batch', batch)
  redis.call('ZADD', ids, seq, pid)
  -- payload is embedded as JSON, not re-quoted, so a snapshot decodes in one pass
  redis.call('HSET', state, key,
    '{"seq":' .. seq .. ',"processingId":' .. cjson.encode(pid) .. ',"data":' .. payload .. '}')
  appended = appended + 1
end

for c = start, chunk - 1 do
  local records = cmsgpack.unpack(redis.call('HGET', staging, 'c' .. c))
  for i = 1, #records, 3 do
    append(records[i], records[i + 1], records[i + 2])
  end
end
for i = 8, #ARGV, 3 do
  append(ARGV[i], ARGV[i + 1], ARGV[i + 2])
end
redis.call('DEL', staging)

redis.call('HSET', meta, 'last_seq', seq, 'last_batch', batch, 'last_chunk', chunk, 'last_commit_ms', now_ms)
redis.call('HINCRBY', meta, 'records_committed', appended)
redis.call('HINCRBY', meta, 'duplicates_suppressed', duplicates)
redis.call('HINCRBY', meta, 'batches_committed', 1)

local floor_seq = seq - retention
if floor_seq > 0 then
  redis.call('XTRIM', log, 'MINID', (floor_seq + 1) .. '-0')
  redis.call('ZREMRANGEBYSCORE', ids, '-inf', floor_seq)
  redis.call('HSET', meta, 'first_seq', floor_seq + 1)
end

return {'committed', epoch, last_seq + 1, seq, appended, duplicates}
