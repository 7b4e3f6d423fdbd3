-- Leave a fire waiting for the run before it: make it the task's pending
-- retry unless the task's last retry, pending or taken, is another one that
-- is pending, or a taken one of a later fire (or the same fire and a later
-- attempt). KEYS[1] the retries hash. ARGV[1] the task's name, ARGV[2] the
-- retry's value (as record.lua writes it), whose first ARGV[3] bytes (its
-- fire and attempt, zero-padded) name and order it.
-- Returns 1 if the retry is the task's last one once it returns, pending
-- or taken (a call sent again after its first left it, and another node
-- took it since, answers 1 and changes nothing), 0 if it changed nothing
-- for another. The answer is read from the hash: no call's key is needed.
local n = tonumber(ARGV[3])
local name = string.sub(ARGV[2], 1, n)
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  local last = string.sub(v, 1, n)
  if last == name then
    return 1
  end
  if string.sub(v, -2) ~= ' t' or last > name then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
