-- $1 namespace, $2 the event's Key, $3 its At (Unix nanoseconds), $4 node,
-- $5 actor, $6 action, $7 target, $8 note, $9 before, $10 after, $11 how
-- many entries the trail keeps. Returns the entry of the Key: the one held
-- (an append sent again stores nothing), or the one this statement
-- stored, with the Seq it drew from the namespace's counter row; no row
-- if a racing append of the same Key committed first (the caller runs the
-- statement again, whose snapshot holds it: the Seq drawn is not reused).
-- The counter row's lock, which the update takes and the commit frees,
-- orders the appends: the append of Seq n commits before the one of n+1
-- draws it. The trim deletes the entries past the bound that its snapshot
-- sees: those of appends that committed while it waited for the lock go
-- at the next append.
WITH held AS (
	SELECT seq, key, at, node, actor, action, target, note, before, after
	FROM $EVENTS WHERE ns = $1::text AND key = $2::text
), drawn AS (
	INSERT INTO $EVENTSEQ AS c (ns, seq) SELECT $1::text, 1 WHERE NOT EXISTS (SELECT FROM held)
	ON CONFLICT (ns) DO UPDATE SET seq = c.seq + 1
	RETURNING c.seq
), stored AS (
	INSERT INTO $EVENTS (ns, seq, key, at, node, actor, action, target, note, before, after)
	SELECT $1::text, seq, $2::text, $3::bigint, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text FROM drawn
	ON CONFLICT (ns, key) DO NOTHING
	RETURNING seq, key, at, node, actor, action, target, note, before, after
), trimmed AS (
	DELETE FROM $EVENTS WHERE ns = $1::text AND seq <= (SELECT seq FROM stored) - $11::bigint
)
SELECT * FROM held UNION ALL SELECT * FROM stored
