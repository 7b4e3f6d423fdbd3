-- Renew or end a member's life in a group (locks.Membership).
-- KEYS[1] the group's sorted set: member -> the instant its life ends, in
-- ms on the server's clock. ARGV[1] the member, ARGV[2] its life in ms, or
-- 0 to leave.
-- Returns the live members (a heartbeat) or nothing (a leave). A retry of
-- either answers as its first attempt did.
if ARGV[2] == '0' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local life = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + life, ARGV[1])
if redis.call('PTTL', KEYS[1]) < life then
  redis.call('PEXPIRE', KEYS[1], life)
end
return redis.call('ZRANGE', KEYS[1], 0, -1)
