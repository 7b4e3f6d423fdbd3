-- Release a lease if it is still the current holder, and tell waiters.
-- KEYS[1] the lock key, KEYS[2] the key's released list (same hash slot).
-- ARGV[1] the lease's identity "<token>:<nonce>" (the lock's value without
-- its mark), ARGV[2] the key's release notification channel, ARGV[3] '1'
-- if the releasing driver has waiters for the key, ARGV[4] the handoff
-- reservation's TTL in ms.
-- Returns 1 when released (now, or earlier by this lease's holder), 0 when
-- the lease was no longer the holder (it expired or was superseded: nothing
-- is touched).
--
-- A lease marked '*' (an Acquire of locks.Wait was refused during it) is
-- not deleted but replaced by a reservation, '~', that only a caller that
-- has waited may take (see acquire.lua), for ARGV[4] ms at most. Other
-- leases are deleted.
--
-- The released list is the tombstone: the identities of the key's leases
-- that their holders released, newest first. A retry of a Release whose
-- first attempt released the key finds its lease among the first 8 and
-- answers 1 again, even if a successor took the key in between. An entry is
-- never wrong (that lease was released by its holder); the count and the
-- TTL only bound how long a retry is recognised. The list lives at least a
-- minute after the key's last release: a release that finds less left sets
-- two minutes, so that most releases of a busy key only read the TTL. It is
-- cut to 8 entries once it holds 16.
--
-- The release is published, with the token as the message, only if an
-- Acquire was refused during the lease (the value carries a mark) or the
-- releasing driver has waiters, so uncontended locks cost no notification.
local id = ARGV[1]
local v = redis.call('GET', KEYS[1])
local mark = ''
if v ~= id then
  mark = v and string.sub(v, #id + 1)
  if not v or string.sub(v, 1, #id) ~= id or (mark ~= '+' and mark ~= '*') then
    return redis.call('LPOS', KEYS[2], id, 'MAXLEN', 8) and 1 or 0
  end
end
if mark == '*' then
  redis.call('SET', KEYS[1], '~', 'PX', ARGV[4])
else
  redis.call('DEL', KEYS[1])
end
local n = redis.call('LPUSH', KEYS[2], id)
if n == 1 or redis.call('PTTL', KEYS[2]) < 60000 then
  redis.call('PEXPIRE', KEYS[2], 120000)
end
if n >= 16 then
  redis.call('LTRIM', KEYS[2], 0, 7)
end
if mark ~= '' or ARGV[3] == '1' then
  redis.call('PUBLISH', ARGV[2], string.match(id, '^[^:]*'))
end
return 1
