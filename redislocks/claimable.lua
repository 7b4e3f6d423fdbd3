-- claimable(key, seq, nonce) is true when a claim of seq by the call of
-- nonce may be recorded under key: no claim is there, or one below seq, or
-- this call's own claim of seq (its first attempt's, seen by a retry). A
-- claim record is "<seq>:<nonce>".
local function claimable(key, seq, nonce)
  local v = redis.call('GET', key)
  if not v then
    return true
  end
  local sep = string.find(v, ':', 1, true)
  local held = tonumber(string.sub(v, 1, sep - 1))
  if held ~= seq then
    return held < seq
  end
  return string.sub(v, sep + 1) == nonce
end
