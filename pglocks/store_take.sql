-- $1 namespace, $2 task, $3 the taking node. Deletes the task's pending
-- request, adds the taker's placeholder run (fire_ns: the request's instant
-- in Unix nanoseconds, as the Redis store writes it) and returns the
-- instant, in one statement: of the sessions racing for one request, only
-- the one whose DELETE removed the row gets it and adds a placeholder. The
-- oldest run goes if the task has at least $4 (the history length).
WITH taken AS (
	DELETE FROM $REQUESTS WHERE ns = $1::text AND task = $2::text RETURNING at
), placeholder AS (
	INSERT INTO $RUNS (ns, task, run)
	SELECT $1::text, $2::text,
		json_build_object('fire_ns', at, 'manual', true, 'node', $3::text, 'outcome', 'taken')::text
	FROM taken
), trimmed AS (
	-- A placeholder never shortens the history (a record's TaskRun.Keep
	-- may have made it longer than $4): the oldest run goes only when the
	-- task has at least $4 (the history length) before it.
	DELETE FROM $RUNS
	WHERE EXISTS (SELECT 1 FROM taken) AND ns = $1::text AND task = $2::text
		AND id = (SELECT min(id) FROM $RUNS WHERE ns = $1::text AND task = $2::text)
		AND (SELECT count(*) FROM $RUNS WHERE ns = $1::text AND task = $2::text) >= $4::bigint
)
SELECT at FROM taken
