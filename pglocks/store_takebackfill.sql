-- $1 namespace, $2 task, $3 the backfill's id, $4 the instant (Unix
-- nanoseconds), $5 the taker's placeholder run (JSON, with fire_ns as a
-- take of a request writes it), $6 how the JSON of a run of $4 that is not
-- manual begins ('{"fire":"<instant>","node":'), $7 what a placeholder of
-- a take of $4 contains. If the task's backfill is $3, running, with
-- its cursor before $4, moves the cursor to $4 and counts the instant
-- refused if the backfill does not force its instants and $4 is known to
-- have run (a backfill took it, it was known at the start, or a kept run
-- of it started or was taken), or else taken, adding $4 to the instants known to have run and
-- the placeholder to the runs; returns whether it refused, and no row when
-- it changed nothing (stale), in one statement: of the sessions racing for
-- one instant, only the one whose UPDATE moved the cursor counts it (the
-- others wait for its row lock, then see the cursor at $4). Only a take of
-- $4 adds it to the instants known to have run while the backfill runs, so
-- what the statement's snapshot knows of $4 holds. The oldest run goes if
-- the task has at least $8 (the history length).
WITH known AS (
	SELECT EXISTS (SELECT 1 FROM $RAN WHERE ns = $1::text AND task = $2::text AND fire = $4::bigint)
		OR EXISTS (SELECT 1 FROM $RUNS WHERE ns = $1::text AND task = $2::text AND (
			-- A run's JSON escapes every quote within its strings: its
			-- fields' own text is found only where they are, and the row is
			-- not parsed.
			(left(run, length($6::text)) = $6::text
				AND (strpos(run, '"start":"0001-01-01T00:00:00Z"') = 0 OR strpos(run, '"outcome":"taken"') > 0))
			-- A placeholder (json_build_object's text) is read as JSON.
			OR CASE WHEN run LIKE '{"fire_ns"%' THEN run::jsonb @> $7::jsonb AND NOT run::jsonb @> '{"manual": true}'::jsonb ELSE false END
		)) AS ran
), moved AS (
	UPDATE $BACKFILLS SET cursor = $4::bigint,
		refused = refused + (NOT force AND known.ran)::integer, taken = taken + (force OR NOT known.ran)::integer
	FROM known
	WHERE ns = $1::text AND task = $2::text AND id = $3::text AND state = 'running' AND (cursor IS NULL OR cursor < $4::bigint)
	RETURNING NOT force AND known.ran AS refused
), noted AS (
	INSERT INTO $RAN (ns, task, fire) SELECT $1::text, $2::text, $4::bigint FROM moved WHERE NOT refused ON CONFLICT DO NOTHING
), placeholder AS (
	INSERT INTO $RUNS (ns, task, run) SELECT $1::text, $2::text, $5::text FROM moved WHERE NOT refused
), trimmed AS (
	-- A placeholder never shortens the history (a record's TaskRun.Keep
	-- may have made it longer than $8): the oldest run goes only when the
	-- task has at least $8 (the history length) before it.
	DELETE FROM $RUNS
	WHERE EXISTS (SELECT 1 FROM moved WHERE NOT refused) AND ns = $1::text AND task = $2::text
		AND id = (SELECT min(id) FROM $RUNS WHERE ns = $1::text AND task = $2::text)
		AND (SELECT count(*) FROM $RUNS WHERE ns = $1::text AND task = $2::text) >= $8::bigint
)
SELECT refused FROM moved
