-- declare_rewind.lua: a reader (a gateway's hub) saw the log hold an entry that it no longer holds, in the
-- same epoch: the log went back (a lagging replica was promoted) and may be written again under the same
-- seqs with other entries. Declare a new epoch, so that no reader resumes across it by seq alone.
--
-- The check and the change are one call, on the primary: the epoch is replaced only if it is still the
-- one the reader saw AND the log really lacks what the reader saw there (its last_seq below the seq, or
-- another entry at that seq: the digest differs). So any number of gateways may call it for one rewind:
-- the first replaces the epoch, the others find it replaced and change nothing; a reader with a stale view
-- of a log that did not go back changes nothing either. The entries, the state, the ids and the batch
-- marker stay as they are (the log the writer continues is consistent with its checkpoint: it published
-- the batches the log holds), so the writer, fenced on the old epoch, adopts the new one at its next
-- batch without rebuilding (its query id is the meta's; spark/sink.py, _after_loss).
--
-- KEYS[1]  log      stream of committed results, entry id "<seq>-0", fields pid, key, data, ts, batch
-- KEYS[2]  meta     hash (see publish_batch.lua): epoch, last_seq; written here: epoch, created_ms,
--                   rewinds (count of epochs declared here), rewound_at_seq (the seq last seen gone)
--
-- ARGV[1]  epoch      the epoch the reader saw the entry in
-- ARGV[2]  seq        the seq of the entry it saw (> 0)
-- ARGV[3]  digest     that entry's digest (protocol/digest.py: first 16 hex digits of sha1(pid "\n" data)),
--                     or '' when the reader knows only that the log reached that seq
-- ARGV[4]  candidate  the new epoch, used only when the rewind is confirmed here
--
-- Returns {status, epoch}
--   "declared": the rewind was confirmed; "epoch" is the new one
--   "moved":    the stream's epoch is no longer ARGV[1] (another reader declared it, or the log was lost)
--   "intact":   the log holds that entry at that seq (or that seq, without a digest): nothing happened

local log, meta = KEYS[1], KEYS[2]
local seen_epoch, seq, digest, candidate = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]

local epoch = redis.call('HGET', meta, 'epoch') or ''
if epoch ~= seen_epoch then
  return {'moved', epoch}
end
local last_seq = tonumber(redis.call('HGET', meta, 'last_seq') or 0)
local rewound = last_seq < seq
if not rewound and digest ~= '' then
  local found = redis.call('XRANGE', log, seq .. '-0', seq .. '-0')
  if #found == 1 then
    local fields, pid, data = found[1][2], nil, nil
    for i = 1, #fields, 2 do
      if fields[i] == 'pid' then pid = fields[i + 1] elseif fields[i] == 'data' then data = fields[i + 1] end
    end
    rewound = pid == nil or data == nil or string.sub(redis.sha1hex(pid .. '\n' .. data), 1, 16) ~= digest
  end
  -- Trimmed by retention: that entry cannot be compared, and a log does not trim what it never held.
end
if not rewound then
  return {'intact', epoch}
end
local time = redis.call('TIME')
redis.call('HSET', meta, 'epoch', candidate, 'created_ms', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000),
           'rewound_at_seq', seq)
redis.call('HINCRBY', meta, 'rewinds', 1)
return {'declared', candidate}
