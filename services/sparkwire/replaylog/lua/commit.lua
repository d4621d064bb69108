-- commit.lua: a fragment, not a script of its own: replaylog/scripts.py splices it where a script has the line
-- "--@include commit.lua" (publish_batch.lua, commit_rows.lua). The steps both ways of committing take alike,
-- as functions, so that a batch and real-time rows leave the meta hash and the log's length the same way.
--
-- KEYS[1]  log    stream of committed results; passed as `log`
-- KEYS[2]  meta   hash: query_id, query_changes, records_committed, duplicates_suppressed, first_seq and the
--                 counter named by `commits` (written here); passed as `meta`
-- KEYS[3]  state  hash: result key -> {"seq":N,"processingId":"...","data":<payload>} (written here); passed
--                 as `state`
-- KEYS[4]  ids    sorted set: processingId scored by its seq; passed as `ids`
--
-- No ARGV of its own: the including script passes the query id (its ARGV[1]) and the retention (its ARGV[6]
-- in publish_batch.lua, ARGV[4] in commit_rows.lua).

-- The query the log names becomes this one; a change of query (a new checkpoint) is counted.
local function adopt_query(meta, known_query, query_id)
  if known_query ~= query_id then
    if known_query then
      redis.call('HINCRBY', meta, 'query_changes', 1)
    end
    redis.call('HSET', meta, 'query_id', query_id)
  end
end

-- An entry just appended to the log at `seq`: its processingId into the ids (so a later copy is a
-- duplicate) and it as its key's latest state. The entry itself (XADD) stays written out in each script, which
-- names the log's fields there.
local function index_entry(ids, state, seq, pid, key, payload)
  redis.call('ZADD', ids, seq, pid)
  -- payload is embedded as JSON, not re-quoted, so a snapshot decodes in one pass
  redis.call('HSET', state, key,
    '{"seq":' .. seq .. ',"processingId":' .. cjson.encode(pid) .. ',"data":' .. payload .. '}')
end

-- The commit's counters (`commits`: the meta field counting commits of this kind), then the log and its ids
-- trimmed to the newest `retention` seqs, first_seq moving with them.
local function count_and_trim(log, meta, ids, seq, retention, appended, duplicates, commits)
  redis.call('HINCRBY', meta, 'records_committed', appended)
  redis.call('HINCRBY', meta, 'duplicates_suppressed', duplicates)
  redis.call('HINCRBY', meta, commits, 1)

  local floor_seq = seq - retention
  if floor_seq > 0 then
    redis.call('XTRIM', log, 'MINID', (floor_seq + 1) .. '-0')
    redis.call('ZREMRANGEBYSCORE', ids, '-inf', floor_seq)
    redis.call('HSET', meta, 'first_seq', floor_seq + 1)
  end
end
