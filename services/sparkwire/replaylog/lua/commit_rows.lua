-- commit_rows.lua: commit rows of a real-time query (Spark's real-time mode: no micro-batches, each row is
-- written as it comes) into the same log as publish_batch.lua: gap-free seqs after the log's last_seq,
-- the same entry fields, the same state and ids, the same epoch and fence.
--
-- Exactly once across re-sent rows: each row carries its source position, a source (e.g. "topic/partition")
-- and a position in it (Kafka's offset, and the row's index among the rows made of that record: an explode
-- makes several). Spark re-sends rows after a failure (real-time mode commits its offsets at the end of each
-- long batch only), always in the source's order; a row at or below the position already committed for its
-- source is a duplicate and writes nothing. The check and the append are one atomic step, and what it keeps
-- is one position per source (the positions hash), so it does not grow with the rows.
--
-- KEYS[1]  log        stream of committed results (as publish_batch.lua)
-- KEYS[2]  meta       hash (as publish_batch.lua): this script writes epoch, created_ms, first_seq, last_seq,
--                     query_id, last_commit_ms, records_committed, duplicates_suppressed, query_changes,
--                     rows_commits
-- KEYS[3]  state      hash: result key -> latest entry
-- KEYS[4]  ids        sorted set: processingId scored by its seq, trimmed together with the log
-- KEYS[5]  positions  hash: source -> "<offset>:<index>", the last row committed from it
--
-- ARGV[1]  query id   Spark streaming query id
-- ARGV[2]  batch id   the real-time batch (Spark's epoch) the rows were read in; stored in the entries' batch
-- ARGV[3]  epoch      candidate epoch; used only when the stream has none yet and there is no fence
-- ARGV[4]  retention  number of entries (and ids) to keep, > 0
-- ARGV[5]  fence      '' for none; otherwise the epoch the writer last saw: nothing is written (status
--                     "fenced") unless the stream has exactly that epoch
-- ARGV[6..] rows      sextuples: source, offset, index, processingId, key, payload (JSON); the rows of one
--                     source in their order
--
-- Returns {status, epoch, first_seq, last_seq, appended, duplicates}
--   status "committed": rows not committed before were appended with seqs first_seq..last_seq (first_seq >
--                       last_seq when every row was a duplicate)
--   status "fenced":    the stream's epoch is not the fence; nothing was written

local log, meta, state, ids, positions = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local query_id = ARGV[1]
local batch = ARGV[2]
local retention = tonumber(ARGV[4])
local fence = ARGV[5]

-- Spliced in when loaded (replaylog/scripts.py): the stream's position and the fence check as every writing
-- script has them (fence.lua), and the steps a commit shares with publish_batch.lua (commit.lua).
--@include fence.lua
--@include commit.lua

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if epoch == '' then
  epoch = ARGV[3]
  redis.call('HSET', meta, 'epoch', epoch, 'created_ms', now_ms, 'first_seq', 1, 'last_seq', 0)
end
adopt_query(meta, redis.call('HGET', meta, 'query_id'), query_id)

-- "<offset>:<index>" -> two numbers (offsets fit a double exactly up to 2^53)
local function parse(position)
  local colon = string.find(position, ':', 1, true)
  return tonumber(string.sub(position, 1, colon - 1)), tonumber(string.sub(position, colon + 1))
end

local seq = last_seq
local appended, duplicates = 0, 0
local seen = {}  -- source -> {offset, index}: the last position of each source, as this call moves it
for i = 6, #ARGV, 6 do
  local source, offset, index = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local pid, key, payload = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local last = seen[source]
  if last == nil then
    local stored = redis.call('HGET', positions, source)
    if stored then
      local o, x = parse(stored)
      last = {o, x}
    else
      last = {-1, -1}
    end
  end
  if offset < last[1] or (offset == last[1] and index <= last[2]) then
    duplicates = duplicates + 1
  else
    seq = seq + 1
    redis.call('XADD', log, seq .. '-0', 'pid', pid, 'key', key, 'data', payload, 'ts', now_ms, 'batch', batch)
    index_entry(ids, state, seq, pid, key, payload)
    last = {offset, index}
    appended = appended + 1
  end
  seen[source] = last
end
for source, last in pairs(seen) do
  redis.call('HSET', positions, source, string.format('%d:%d', last[1], last[2]))
end

redis.call('HSET', meta, 'last_seq', seq, 'last_commit_ms', now_ms)
count_and_trim(log, meta, ids, seq, retention, appended, duplicates, 'rows_commits')

return {'committed', epoch, last_seq + 1, seq, appended, duplicates}
