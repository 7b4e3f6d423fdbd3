-- Take one of a task's counted runs for a fire (taskstate.Store.TakeRun),
-- in one step.
-- KEYS[1] the runs-taken hash, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries). ARGV[1] the task's
-- name, ARGV[2] how long the call is remembered, in ms, ARGV[3] the fire
-- (Unix nanoseconds, as text: compared as text, which Lua's numbers would
-- round), ARGV[4] the most runs the task may have taken, ARGV[5] how many
-- of the task's last takes the value keeps (taskstate.MaxRunTakes).
-- A value of the hash is "<taken> <fire> <n> <fire> <n> ...": how many runs
-- the task took, then its last takes, oldest first, each a fire and the
-- number it took.
-- Returns the number the fire took, now or in an earlier call (a fire among
-- the last takes answers its number and takes nothing), or 0 if the task
-- took its max runs, taking nothing. Reading and writing the count in one
-- script is what lets exactly one of the fires racing for the last run
-- have it. The call's key is read first: a retry of a call whose first
-- attempt ran (its reply lost) answers what that attempt did, whatever
-- was taken since, and takes nothing again.
local done = redis.call('GET', KEYS[2])
if done then
  return tonumber(done)
end
local function answer(n)
  redis.call('SET', KEYS[2], n, 'PX', ARGV[2])
  return n
end
local taken, recent = 0, {}
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  local words = {}
  for w in string.gmatch(v, '%S+') do
    words[#words + 1] = w
  end
  taken = tonumber(words[1]) or 0
  for i = 2, #words - 1, 2 do
    if words[i] == ARGV[3] then
      return answer(tonumber(words[i + 1]))
    end
    recent[#recent + 1] = words[i] .. ' ' .. words[i + 1]
  end
end
if taken >= tonumber(ARGV[4]) then
  return answer(0)
end
taken = taken + 1
recent[#recent + 1] = ARGV[3] .. ' ' .. string.format('%d', taken)
local first = math.max(1, #recent - tonumber(ARGV[5]) + 1)
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', taken) .. ' ' .. table.concat(recent, ' ', first))
return answer(taken)
