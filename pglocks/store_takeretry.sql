-- $1 namespace, $2 task, $3 the taker's placeholder run (JSON, with
-- fire_ns as a take of a request writes it), $4 the retry's fire (Unix
-- nanoseconds), $5 its attempt. Marks the task's pending retry taken if it
-- is that one (the row stays, so that a record sent again does not make it
-- pending again: see store_retry.sql), adds the placeholder and returns how
-- many it took (0 or 1), in one statement: of the sessions racing for one
-- retry, only the one whose UPDATE changed the row adds a placeholder. The
-- oldest run goes if the task has at least $6 (the history length).
WITH taken AS (
	UPDATE $RETRIES SET taken = true
	WHERE ns = $1::text AND task = $2::text AND fire = $4::bigint AND attempt = $5::integer AND NOT taken
	RETURNING 1
), placeholder AS (
	INSERT INTO $RUNS (ns, task, run) SELECT $1::text, $2::text, $3::text FROM taken
), trimmed AS (
	-- A placeholder never shortens the history (a record's TaskRun.Keep
	-- may have made it longer than $6): the oldest run goes only when the
	-- task has at least $6 (the history length) before it.
	DELETE FROM $RUNS
	WHERE EXISTS (SELECT 1 FROM taken) AND ns = $1::text AND task = $2::text
		AND id = (SELECT min(id) FROM $RUNS WHERE ns = $1::text AND task = $2::text)
		AND (SELECT count(*) FROM $RUNS WHERE ns = $1::text AND task = $2::text) >= $6::bigint
)
SELECT count(*) FROM taken
