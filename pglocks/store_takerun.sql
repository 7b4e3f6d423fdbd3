-- $1 namespace, $2 task, $3 the fire (Unix nanoseconds), $4 the most runs
-- the task may have taken, $5 how many of the task's last takes its row
-- keeps (taskstate.MaxRunTakes). Takes the task's next run for the fire,
-- unless the fire is among its last takes (fires, with the numbers they
-- took in numbers, oldest first) or the task took $4 runs, and returns
-- the number the fire took, now or before, or 0, in one statement. The
-- task's row is made by its first take; a take of a task that has one
-- updates it, whose row lock orders the sessions racing for the last run:
-- each computes from the row as the one before it left it, so exactly one
-- gets it. The row is written even when the call takes nothing (the same
-- values), so that RETURNING reads the row as the lock holds it, which a
-- read of the statement's snapshot may not yet see.
INSERT INTO $RUNCOUNTS AS c (ns, task, taken, fires, numbers)
VALUES ($1::text, $2::text, 1, ARRAY[$3::bigint], ARRAY[1])
ON CONFLICT (ns, task) DO UPDATE SET
	taken = CASE WHEN c.taken < $4::integer AND $3::bigint <> ALL (c.fires) THEN c.taken + 1 ELSE c.taken END,
	fires = CASE WHEN c.taken < $4::integer AND $3::bigint <> ALL (c.fires)
		THEN (c.fires || $3::bigint)[greatest(1, cardinality(c.fires) + 2 - $5::integer):] ELSE c.fires END,
	numbers = CASE WHEN c.taken < $4::integer AND $3::bigint <> ALL (c.fires)
		THEN (c.numbers || c.taken + 1)[greatest(1, cardinality(c.numbers) + 2 - $5::integer):] ELSE c.numbers END
RETURNING coalesce(numbers[array_position(fires, $3::bigint)], 0)
