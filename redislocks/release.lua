-- Release a lease if it is still the current holder, and tell waiters.
-- KEYS[1] the lock key, KEYS[2] the key's tombstone (same hash slot).
-- ARGV[1] the lease's identity "<token>:<nonce>" (the lock's value without
-- its mark), ARGV[2] the key's release notification channel, ARGV[3] '1'
-- if the releasing driver has waiters for the key, ARGV[4] the tombstone's
-- TTL in ms, ARGV[5] the handoff reservation's TTL in ms.
-- Returns 1 when released (now, or earlier by this lease's holder), 0 when
-- the lease was no longer the holder (it expired or was superseded: nothing
-- is touched).
--
-- A lease marked '*' (an Acquire of locks.Wait was refused during it) is
-- not deleted but replaced by a reservation, '~', that only a caller that
-- has waited may take (see acquire.lua), for ARGV[5] ms at most. Other
-- leases are deleted.
--
-- The tombstone remembers the identities of the last 8 leases of the key
-- that their holders released, newest first, separated by spaces. A retry
-- of a Release whose first attempt released the key finds its lease there
-- and answers 1 again, even if a successor took the key in between. An
-- entry is never wrong (that lease was released by its holder); the count
-- and the TTL only bound how long a retry is recognised.
--
-- The release is published, with the token as the message, only if an
-- Acquire was refused during the lease (the value carries a mark) or the
-- releasing driver has waiters, so uncontended locks cost no notification.
local id = ARGV[1]
local v = redis.call('GET', KEYS[1])
local mark = v and string.sub(v, #id + 1)
if not v or string.sub(v, 1, #id) ~= id or (mark ~= '' and mark ~= '+' and mark ~= '*') then
  local tomb = redis.call('GET', KEYS[2])
  if tomb and string.find(' ' .. tomb .. ' ', ' ' .. id .. ' ', 1, true) then
    return 1
  end
  return 0
end
if mark == '*' then
  redis.call('SET', KEYS[1], '~', 'PX', ARGV[5])
else
  redis.call('DEL', KEYS[1])
end
local tomb = redis.call('GET', KEYS[2])
if tomb then
  -- Keep the newest 7 of the earlier entries.
  local cut = 0
  for _ = 1, 7 do
    cut = string.find(tomb, ' ', cut + 1, true)
    if not cut then
      break
    end
  end
  if cut then
    tomb = string.sub(tomb, 1, cut - 1)
  end
  tomb = id .. ' ' .. tomb
else
  tomb = id
end
redis.call('SET', KEYS[2], tomb, 'PX', ARGV[4])
if mark ~= '' or ARGV[3] == '1' then
  redis.call('PUBLISH', ARGV[2], string.match(id, '^[^:]*'))
end
return 1
