-- $1 namespace, $2 task, $3 the retry a run leaves pending, as JSON
-- {fire, attempt, due, manual} (fire and due in Unix nanoseconds), in place
-- of the task's last one, pending or taken, if it is of a later fire, or of
-- the same fire and a later attempt: a record sent again after its retry
-- was taken leaves nothing. (In the record function, the retry is its
-- sixth argument.)
INSERT INTO $RETRIES (ns, task, fire, attempt, due, manual)
SELECT $1::text, $2::text, (r->>'fire')::bigint, (r->>'attempt')::integer, (r->>'due')::bigint, (r->>'manual')::boolean
FROM (SELECT $3::jsonb AS r) retry
ON CONFLICT (ns, task) DO UPDATE SET fire = EXCLUDED.fire, attempt = EXCLUDED.attempt, due = EXCLUDED.due, manual = EXCLUDED.manual, taken = false
WHERE (EXCLUDED.fire, EXCLUDED.attempt) > ($RETRIES.fire, $RETRIES.attempt)
