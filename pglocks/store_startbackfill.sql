-- $1 namespace, $2 task, $3 the backfill, as JSON of its row's columns
-- (first, last and created in Unix nanoseconds; cursor NULL, counts 0,
-- state running), $4 the instants known to have run (Unix nanoseconds).
-- Makes it the task's backfill in place of its last one unless that one is
-- running, adds the instants to those known to have run and returns NULL;
-- or, when a backfill is running, changes nothing and returns its row as
-- JSON. The body of the start function: the upsert locks the running row,
-- even one that a racing start inserted after this call's snapshot, and
-- the SELECT, a statement of its own (with a snapshot of its own), reads
-- it as its starter committed it.
BEGIN
	INSERT INTO $BACKFILLS SELECT * FROM jsonb_populate_record(NULL::$BACKFILLS, $3 || jsonb_build_object('ns', $1, 'task', $2))
	ON CONFLICT (ns, task) DO UPDATE SET id = EXCLUDED.id, first = EXCLUDED.first, last = EXCLUDED.last, force = EXCLUDED.force,
		total = EXCLUDED.total, cursor = EXCLUDED.cursor, taken = EXCLUDED.taken, refused = EXCLUDED.refused,
		state = EXCLUDED.state, node = EXCLUDED.node, created = EXCLUDED.created
	WHERE $BACKFILLS.state <> 'running';
	IF FOUND THEN
		INSERT INTO $RAN (ns, task, fire) SELECT $1, $2, unnest($4) ON CONFLICT DO NOTHING;
		RETURN NULL;
	END IF;
	RETURN (SELECT to_jsonb(b)::text FROM $BACKFILLS b WHERE ns = $1 AND task = $2);
END
