-- fence.lua: a fragment, not a script of its own: replaylog/scripts.py splices it where a script has the line
-- "--@include fence.lua" (publish_batch.lua, stage_chunk.lua, commit_rows.lua), so that every script that
-- writes the log reads the stream's position and refuses a fenced writer in exactly the same way.
--
-- KEYS[2]  meta   hash: epoch, last_seq (read here); the including script has it in the local `meta`
--
-- ARGV[n]  fence  '' for none; otherwise the epoch the writer last saw; the including script has it in the
--                 local `fence` (ARGV[7] of publish_batch.lua and stage_chunk.lua, ARGV[5] of commit_rows.lua)
--
-- Defines, for the rest of the script: `epoch` (the stream's, '' for none), `last_seq` (0 for none) and
-- `unchanged(status)`, the reply of a call that wrote nothing: {status, epoch, last_seq + 1, last_seq, 0, 0}.
-- Returns that reply with status "fenced" unless the fence is '' or exactly the stream's epoch.

local epoch = redis.call('HGET', meta, 'epoch') or ''
local last_seq = tonumber(redis.call('HGET', meta, 'last_seq') or 0)

local function unchanged(status)
  return {status, epoch, last_seq + 1, last_seq, 0, 0}
end

-- First of all: a writer that saw another epoch must not write into this one (it would append its batch
-- before the history that was lost, and a new epoch created by its batch would hide the loss).
if fence ~= '' and fence ~= epoch then
  return unchanged('fenced')
end
