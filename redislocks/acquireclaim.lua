-- Claim fires and acquire their leases, each in one step
-- (locks.ClaimAcquirer). claimable.lua and acquire.lua, as the function
-- acquire(KEYS, ARGV), precede this script.
-- Per fire i (from 0), KEYS[3i+1] the lock key, KEYS[3i+2] its token
-- counter, KEYS[3i+3] the claim key (any slot: the driver sends this script
-- on a single Redis only); ARGV[6i+1] to ARGV[6i+3] as acquire.lua's
-- ARGV[1] to ARGV[3] (ARGV[6i+2], the fire's nonce, is also the claim's),
-- ARGV[6i+4] the claim's seq, ARGV[6i+5] the claim's TTL in ms, ARGV[6i+6]
-- '1' to record the claim when the key is held too.
-- Returns one reply per fire, in order: acquire.lua's (the token, as text; 0 held;
-- -1 reserved), or -2 when the claim is refused: then nothing was changed
-- for that fire.
local replies = {}
local now
for i = 0, #KEYS / 3 - 1 do
  local k, a = 3 * i, 6 * i
  local reply = -2
  local ok, record = claimable(KEYS[k + 3], tonumber(ARGV[a + 4]), ARGV[a + 2], ARGV[a + 4])
  if ok ~= 0 then
    -- ok 2: a resend of a fire whose claim a later one replaced; its lease
    -- is still its own (acquire.lua recognises the nonce).
    now = now or redis.call('TIME')
    reply = acquire({KEYS[k + 1], KEYS[k + 2]}, {ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], now})
    if record and (type(reply) == 'string' or (reply == 0 and ARGV[a + 6] == '1')) then
      redis.call('SET', KEYS[k + 3], record, 'PX', ARGV[a + 5])
    end
  end
  replies[i + 1] = reply
end
return replies
