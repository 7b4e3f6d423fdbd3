-- Fenced append, as in the payroll example: accept an entry only if its
-- token is at least the highest accepted, so a stale holder cannot write
-- behind its successor.
-- KEYS[1] the list, KEYS[2] the highest accepted token.
-- ARGV[1] the writer's token, ARGV[2] the entry.
local high = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) < high then
  return {0, tostring(high)}
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[2])
return {1, ARGV[1]}
