-- $1 namespace, $2 task, $3 the waiting fire (Unix nanoseconds), $4 its
-- attempt, $5 its due time (Unix nanoseconds), $6 manual. Makes it the
-- task's pending retry unless the task's last retry, pending or taken, is
-- another one that is pending, or a taken one of a later fire (or the same
-- fire and a later attempt), and returns 1 if the fire is the task's last
-- retry once it returns (left now, or before: pending, or taken since), 0
-- if it changed nothing for another, in one statement. A row already there
-- is locked and judged in its latest version (ON CONFLICT, under READ
-- COMMITTED too): of the sessions racing with different fires while none
-- waits, one inserts or updates the row and the others, behind its lock,
-- find another fire pending. The update of the fire's own row changes
-- nothing (it keeps its due time, manual flag and taken flag) but returns
-- it, so that a call sent again answers 1.
WITH waiting AS (
	INSERT INTO $RETRIES AS r (ns, task, fire, attempt, due, manual)
	VALUES ($1::text, $2::text, $3::bigint, $4::integer, $5::bigint, $6::boolean)
	-- Past the WHERE, the row is either a taken one of an earlier fire,
	-- which the fire replaces, or the fire's own, which it keeps as it is.
	ON CONFLICT (ns, task) DO UPDATE SET fire = EXCLUDED.fire, attempt = EXCLUDED.attempt,
		due = CASE WHEN (EXCLUDED.fire, EXCLUDED.attempt) > (r.fire, r.attempt) THEN EXCLUDED.due ELSE r.due END,
		manual = CASE WHEN (EXCLUDED.fire, EXCLUDED.attempt) > (r.fire, r.attempt) THEN EXCLUDED.manual ELSE r.manual END,
		taken = r.taken AND (EXCLUDED.fire, EXCLUDED.attempt) = (r.fire, r.attempt)
	WHERE r.taken AND (EXCLUDED.fire, EXCLUDED.attempt) > (r.fire, r.attempt)
		OR (EXCLUDED.fire, EXCLUDED.attempt) = (r.fire, r.attempt)
	RETURNING 1
)
SELECT count(*) FROM waiting
