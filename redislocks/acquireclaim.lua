-- Claim a fire and acquire its lease in one step (locks.ClaimAcquirer).
-- claimable.lua and acquire.lua, as the function acquire(KEYS, ARGV),
-- precede this script.
-- KEYS[1] the lock key, KEYS[2] its token counter, KEYS[3] the claim key
-- (any slot: the driver sends this script on a single Redis only).
-- ARGV[1] to ARGV[4] as acquire.lua's (ARGV[3], the call's nonce, is also
-- the claim's), ARGV[5] the claim's seq, ARGV[6] the claim's TTL in ms,
-- ARGV[7] '1' to record the claim when the key is held too.
-- Returns acquire.lua's reply (the token; 0 held; -1 reserved), or -2 when
-- the claim is refused: then nothing was changed.
if not claimable(KEYS[3], tonumber(ARGV[5]), ARGV[3]) then
  return -2
end
local token = acquire(KEYS, ARGV)
if token > 0 or (token == 0 and ARGV[7] == '1') then
  redis.call('SET', KEYS[3], ARGV[5] .. ':' .. ARGV[3], 'PX', ARGV[6])
end
return token
