-- Record a claim: seq under the key, unless a claim of seq or higher is
-- recorded there (claimable.lua, which precedes this script, says which).
-- KEYS[1] the claim key. ARGV[1] the seq, ARGV[2] the record's TTL in ms,
-- ARGV[3] the calling attempt's nonce, the same across the client's retries.
-- Returns 1 when recorded, 0 when a claim of seq or higher was there first.
--
-- A retry of a call whose first attempt recorded the claim finds its own
-- nonce and answers 1 again, even once a later claim replaced it.
local ok, record = claimable(KEYS[1], tonumber(ARGV[1]), ARGV[3], ARGV[1])
if ok == 0 then
  return 0
end
if record then
  redis.call('SET', KEYS[1], record, 'PX', ARGV[2])
end
return 1
