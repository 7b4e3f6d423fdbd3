-- Record a claim: seq under the key, unless a claim of seq or higher is
-- recorded there.
-- KEYS[1] the claim key. ARGV[1] the seq, ARGV[2] the record's TTL in ms,
-- ARGV[3] the calling attempt's nonce, the same across the client's retries.
-- Returns 1 when recorded, 0 when a claim of seq or higher was there first.
--
-- The value is "<seq>:<nonce>". A retry of a call whose first attempt
-- recorded the claim finds its own nonce and answers 1 again.
local v = redis.call('GET', KEYS[1])
if v then
  local sep = string.find(v, ':', 1, true)
  local held = tonumber(string.sub(v, 1, sep - 1))
  local seq = tonumber(ARGV[1])
  if held > seq then
    return 0
  end
  if held == seq then
    if string.sub(v, sep + 1) == ARGV[3] then
      return 1
    end
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[3], 'PX', ARGV[2])
return 1
