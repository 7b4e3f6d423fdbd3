-- Create, update or delete a stored schedule, and move the schedules'
-- generation on if that changed them.
-- KEYS[1] the schedules hash, KEYS[2] the schedules' generation, KEYS[3]
-- the call's key (named after the call's nonce, the same across the
-- client's retries). ARGV[1] the schedule's name, ARGV[2] how long the call
-- is remembered, in ms, ARGV[3] what the call does: "create", "update" or
-- "delete", ARGV[4] the schedule's encoding (taskstate.EncodeSchedule), ""
-- for a delete.
-- Returns 1 if it created, updated or deleted the schedule, 0 if it changed
-- nothing: a create of a stored name, an update or a delete of an absent
-- one. An update to the stored encoding leaves the generation. A retry of
-- a call whose first attempt ran answers what that attempt did and changes
-- nothing again, whatever other nodes did in between: a create answers 1
-- though its schedule is stored, an update does not undo a later one, a
-- delete answers 1 and does not delete a schedule created since.
local done = redis.call('GET', KEYS[3])
if done then
  return tonumber(done)
end
local op, old = ARGV[3], redis.call('HGET', KEYS[1], ARGV[1])
local n = 0
if op == 'delete' and old then
  redis.call('HDEL', KEYS[1], ARGV[1])
  n = 1
elseif (op == 'create' and not old) or (op == 'update' and old) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
  n = 1
end
if n == 1 and old ~= ARGV[4] then
  redis.call('INCR', KEYS[2])
end
redis.call('SET', KEYS[3], n, 'PX', ARGV[2])
return n
