-- Claim fires and acquire their leases, each in one step
-- (locks.ClaimAcquirer). claimable.lua and acquire.lua, as the function
-- acquire(KEYS, ARGV), precede this script.
-- Per fire i (from 0), KEYS[3i+1] the lock key, KEYS[3i+2] its token
-- counter, KEYS[3i+3] the claim key (any slot: the driver sends this script
-- on a single Redis only); ARGV[7i+1] to ARGV[7i+4] as acquire.lua's
-- ARGV[1] to ARGV[4] (ARGV[7i+3], the fire's nonce, is also the claim's),
-- ARGV[7i+5] the claim's seq, ARGV[7i+6] the claim's TTL in ms, ARGV[7i+7]
-- '1' to record the claim when the key is held too.
-- Returns one reply per fire, in order: acquire.lua's (the token; 0 held;
-- -1 reserved), or -2 when the claim is refused: then nothing was changed
-- for that fire.
local replies = {}
local now
for i = 0, #KEYS / 3 - 1 do
  local k, a = 3 * i, 7 * i
  local reply = -2
  if claimable(KEYS[k + 3], tonumber(ARGV[a + 5]), ARGV[a + 3]) then
    now = now or redis.call('TIME')
    reply = acquire({KEYS[k + 1], KEYS[k + 2]}, {ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], now})
    if reply > 0 or (reply == 0 and ARGV[a + 7] == '1') then
      redis.call('SET', KEYS[k + 3], ARGV[a + 5] .. ':' .. ARGV[a + 3], 'PX', ARGV[a + 6])
    end
  end
  replies[i + 1] = reply
end
return replies
