-- A claim record is "<seq>:<nonce>", the latest claim, followed by up to 7
-- of the claims it replaced, newest first, each after a space. A resend of
-- a call (go-redis's retry of a lost reply) comes within the client's
-- retries, milliseconds after the call, in which 7 later claims of one key
-- would take 7 more fires of its task.
--
-- claimable(key, seq, nonce, seqText) says whether the call of nonce
-- claims seq (seqText as sent) under key: 1 and the record to set when no
-- claim is there, or one below seq, or this call's own claim (its first
-- attempt's, seen by a resend; a nonce claims one seq); 2 and nil when
-- this call's own claim was replaced since by a later one (a resend after
-- another call claimed a higher seq): the call did claim, and nothing is
-- to be written; 0 and nil when another call's claim of seq or higher is
-- the latest.
local function claimable(key, seq, nonce, seqText)
  local v = redis.call('GET', key)
  if not v then
    return 1, seqText .. ':' .. nonce
  end
  local kept, latest, refused = {seqText .. ':' .. nonce}, true, false
  for entry in string.gmatch(v, '[^ ]+') do
    local sep = string.find(entry, ':', 1, true)
    if string.sub(entry, sep + 1) == nonce then
      if latest then
        return 1, v
      end
      return 2, nil
    end
    if latest and tonumber(string.sub(entry, 1, sep - 1)) >= seq then
      refused = true
    end
    latest = false
    if #kept < 8 then
      kept[#kept + 1] = entry
    end
  end
  if refused then
    return 0, nil
  end
  return 1, table.concat(kept, ' ')
end
