-- stage_chunk.lua: stage one chunk of one Spark micro-batch. Nothing staged is visible to readers;
-- publish_batch.lua then appends the whole staged batch to the log in one call.
--
-- Why two steps: a replicated Redis copies writes to its replicas asynchronously. The writer stages every
-- chunk, waits until a replica holds the staged batch (WAIT), and only then publishes it. A failover right
-- after the publish promotes a replica that still has the staged batch, and publishing it there again gives
-- the same seqs and byte-identical entries (the commit time is fixed at staging): what a client saw under a
-- seq stays what the log holds under it. A driver that dies between two chunks leaves nothing a reader can
-- see either, and its re-run finds its earlier chunks staged.
--
-- A chunk is identified by (query id, batch id, chunk index). A chunk of a batch at or before the marker
-- (last_batch) is a replay (the driver died after its batch was published) and writes nothing; so is a
-- chunk already staged.
--
-- A chunk of a batch more than one past the marker of the same query means the log lost its tail: Spark
-- hands the sink batch N only after batch N-1 was published (and, with WAIT, replicated), so a marker at
-- N-2 or before says Redis lost published batches while keeping the epoch (a failover to a replica that
-- lacked them, a restore of an older snapshot). So does a marker behind the batch this writer remembers
-- publishing (ARGV[6]), whatever query it names. Status "behind": nothing written; the writer starts a
-- new epoch and rebuilds (never silently appends after a hole).
--
-- KEYS[1]  log      stream of committed results, entry id "<seq>-0", fields pid, key, data, ts, batch
-- KEYS[2]  meta     hash: epoch, created_ms, first_seq, last_seq, query_id, last_batch, last_chunk,
--                   last_commit_ms, records_committed, duplicates_suppressed, chunks_replayed,
--                   batches_committed, query_changes, batches_abandoned, tail_losses (publish_batch.lua
--                   and new_epoch.lua write them; this script reads the position and counts replays)
-- KEYS[3]  state    hash: result key -> latest entry (written by publish_batch.lua)
-- KEYS[4]  ids      sorted set: processingId scored by its seq (written by publish_batch.lua)
-- KEYS[5]  staging  hash: the chunks of the one batch not yet visible: query, batch, count, next (the next
--                   chunk index expected), ts (the commit time every entry of the batch gets, fixed when
--                   chunk 0 is staged), c<i> (chunk i's records, MessagePack array of processingId, key,
--                   payload triples)
--
-- ARGV[1]  query id      Spark streaming query id (stable across restarts on one checkpoint)
-- ARGV[2]  batch id      Spark batchId, integer >= 0
-- ARGV[3]  chunk index   0-based position of this chunk in the batch
-- ARGV[4]  chunk count   number of chunks the batch was split into
-- ARGV[5]  consecutive   '1': the batch ids are Spark's own, one after the other, and a batch more than one
--                        past the marker is a lost tail ("behind"); '0': ids may skip (a rebuild commits
--                        only the batches that have results)
-- ARGV[6]  published     the batch id this writer itself last published for this query, -1 if none (a new
--                        driver): with consecutive '1', a log whose marker is not at or past it lost that
--                        batch ("behind"), also when the marker now names another query (a rebuild's)
-- ARGV[7]  fence         '' for none; otherwise the epoch the writer last saw: the chunk is refused
--                        (status "fenced", nothing written) unless the stream has exactly that epoch, so a
--                        writer never stages into a log that was lost and started over behind its back
-- ARGV[8..] records      triples: processingId, key, payload (payload is a JSON document)
--
-- Returns {status, epoch, first_seq, last_seq, appended, duplicates}; first_seq = last_seq + 1 and
-- appended = duplicates = 0 (nothing is appended here)
--   status "staged":    the chunk was staged; nothing is visible yet
--   status "replayed":  the chunk was published or staged before; nothing was written
--   status "restage":   the staged chunks this one follows are missing (Redis lost them, or a new query
--                       started staging); nothing was written: send the batch again from its first chunk
--   status "fenced":    the stream's epoch is not the fence (ARGV[7]); "epoch" is the stream's ('' for none)
--   status "behind":    the log lost published batches of this query (see above); nothing was written

local meta, staging = KEYS[2], KEYS[5]
local query_id = ARGV[1]
local batch = tonumber(ARGV[2])
local chunk = tonumber(ARGV[3])
local chunk_count = tonumber(ARGV[4])
local fence = ARGV[7]

-- Spliced in when loaded (replaylog/scripts.py): the stream's position and the fence check as every writing
-- script has them (fence.lua).
--@include fence.lua

-- The marker belongs to one query: a new checkpoint restarts batch ids at 0, so another query's marker
-- says nothing about this batch (id-level dedup still applies when it is published).
local last_batch = -1
if redis.call('HGET', meta, 'query_id') == query_id then
  last_batch = tonumber(redis.call('HGET', meta, 'last_batch'))
end
local published = tonumber(ARGV[6])

if batch <= last_batch then
  redis.call('HINCRBY', meta, 'chunks_replayed', 1)
  return unchanged('replayed')
end
if ARGV[5] == '1' and ((last_batch >= 0 and batch > last_batch + 1) or last_batch < published) then
  return unchanged('behind')
end

local staged = redis.call('HMGET', staging, 'query', 'batch', 'count', 'next')
local same = staged[1] == query_id and tonumber(staged[2]) == batch and tonumber(staged[3]) == chunk_count
local next_chunk = 0
if same then
  next_chunk = tonumber(staged[4])
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
if not same then
  if redis.call('EXISTS', staging) == 1 then
    redis.call('HINCRBY', meta, 'batches_abandoned', 1)
    redis.call('DEL', staging)
  end
  local time = redis.call('TIME')
  local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('HSET', staging, 'query', query_id, 'batch', batch, 'count', chunk_count, 'ts', now_ms)
end
local records = {}
for i = 8, #ARGV do
  records[#records + 1] = ARGV[i]
end
redis.call('HSET', staging, 'c' .. chunk, cmsgpack.pack(records), 'next', chunk + 1)
return unchanged('staged')
