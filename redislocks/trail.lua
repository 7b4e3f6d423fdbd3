-- Append an event to the namespace's trail of control actions
-- (taskstate.Store.AppendEvent), in one step.
-- KEYS[1] the trail (a sorted set: score the Seq, member "<seq> <JSON>"),
-- KEYS[2] the Keys held (a hash: an event's Key -> its Seq), KEYS[3] the
-- last Seq given (a counter), all in the namespace's hash slot. ARGV[1]
-- the event's Key, ARGV[2] its JSON (taskstate.Event, whose "key" is
-- ARGV[1]), ARGV[3] how many entries the trail keeps.
-- Returns the member of the event's entry: the one stored for the Key
-- before (a resend, the client's or the caller's, stores nothing again),
-- or the new one. Scripts run one at a time, so the Seqs (INCR) increase
-- in the order the appends took effect: a reader of the trail never sees
-- an entry appear below a Seq it read. Past the bound, the oldest entries
-- are dropped, and their Keys forgotten.
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  local m = redis.call('ZRANGEBYSCORE', KEYS[1], held, held)
  if m[1] then
    return m[1]
  end
end
local seq = redis.call('INCR', KEYS[3])
local member = string.format('%d', seq) .. ' ' .. ARGV[2]
redis.call('ZADD', KEYS[1], seq, member)
redis.call('HSET', KEYS[2], ARGV[1], seq)
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if over > 0 then
  local old = redis.call('ZPOPMIN', KEYS[1], over)
  for i = 1, #old, 2 do
    local sp = string.find(old[i], ' ', 1, true)
    local e = cjson.decode(string.sub(old[i], sp + 1))
    local k = redis.call('HGET', KEYS[2], e.key)
    if k and tonumber(k) == tonumber(old[i + 1]) then
      redis.call('HDEL', KEYS[2], e.key)
    end
  end
end
return member
