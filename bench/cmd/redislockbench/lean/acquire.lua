-- A lean layout, for measurement only (the uncontended path of a
-- redislocks-like lock; a held key is refused without marks or handoff):
-- no separate token counter and no tombstone key. The lock key alone
-- carries the state: "<token>:<nonce>" while held, "-<token>:<nonce>" (the
-- last released lease, for a retried Release) for a minute after a release.
-- The last token is read from that record; TIME orders mints otherwise.
-- KEYS[1] the lock key. ARGV[1] the lease TTL in ms, ARGV[2] the nonce.
local held = redis.call('GET', KEYS[1])
local last = 0
if held then
  if string.sub(held, 1, 1) ~= '-' then
    return 0
  end
  last = tonumber(string.match(held, '^%-(%d+)'))
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
if token <= last then
  token = last + 1
end
redis.call('SET', KEYS[1], string.format('%d', token) .. ':' .. ARGV[2], 'PX', ARGV[1])
return token
