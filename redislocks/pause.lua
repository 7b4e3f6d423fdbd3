-- Pause or resume a task, with the call's note (taskstate.Pause as JSON).
-- KEYS[1] the task's paused flag, KEYS[2] the task's last resume, KEYS[3]
-- the call's key (named after the call's nonce, the same across the
-- client's retries). ARGV[1] "1" to pause, "0" to resume, ARGV[2] the
-- pause's JSON ("" for a resume without note, by or at), ARGV[3] how long
-- the call is remembered, in ms.
-- A pause sets the flag to its JSON (the flag of a version before notes
-- was "1"; any value is a pause) and deletes the last resume; a resume
-- deletes the flag and keeps its JSON as the last resume (or none). The
-- task name and the note travel as keys and arguments, never in this
-- text.
-- A retry whose first attempt ran finds the call's key and changes
-- nothing, so that it does not undo another node's SetPaused made in
-- between, nor its note: the call takes effect once, as if at its first
-- attempt.
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
if ARGV[1] == '1' then
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[2])
else
  redis.call('DEL', KEYS[1])
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[2])
  else
    redis.call('SET', KEYS[2], ARGV[2])
  end
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
return 1
