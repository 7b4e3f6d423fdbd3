-- The task state (taskstate.Store) of every namespace: the paused tasks,
-- each with its pause's note, who made it and when (at: Unix nanoseconds,
-- NULL if not known), the last resume of each task that is not paused
-- (the same; a row per task resumed since its last pause), the pending
-- manual-run requests (at: Unix nanoseconds), each task's last retry,
-- pending or taken (fire and due: Unix nanoseconds), and the newest runs
-- of each task (run: JSON, a recorded run's ending with the ID it was
-- recorded with, "id", which a record sent again finds), at most the
-- store's history length per task plus one per concurrent writer, each
-- task's last backfill, running or ended (first, last, cursor and created:
-- Unix nanoseconds; cursor NULL before the first instant), and the
-- instants of each task known to have run (fire: Unix nanoseconds), which
-- a backfill refuses unless it forces them. No row expires: the runs of a
-- task no longer declared, its last retry and backfill, and the instants
-- known to have run (one row per instant a backfill took or StartBackfill
-- was given, never deleted) stay until deleted by hand.
-- SetPaused draws from the pauses sequence, whose last value is the pause
-- generation (taskstate.Poll.Pauses). The stored schedules (body:
-- taskstate.EncodeSchedule's bytes) and each namespace's generation of them
-- (taskstate.Poll.Schedules), which the statement that changes them moves
-- on, came later, and so did the runs counted per task (TakeRun: taken,
-- how many, and the task's last taskstate.MaxRunTakes takes, oldest first,
-- each a fire in fires, in Unix nanoseconds, and the number it took at the
-- same index of numbers; one row per task that took a run, kept until
-- deleted by hand): CreateSchema adds their tables to a database that an
-- earlier version made. So did the pauses' notes: the earlier paused table
-- gets its note, who and at columns, with their defaults (a pause without
-- note), and the resumes' table is added.
CREATE TABLE IF NOT EXISTS $PAUSED (
	ns   text NOT NULL,
	task text NOT NULL,
	note text NOT NULL DEFAULT '',
	who  text NOT NULL DEFAULT '',
	at   bigint,
	PRIMARY KEY (ns, task)
);
-- The columns are added with constant defaults (no rewrite of the rows),
-- in one ALTER TABLE, so that a table has all three or none. Checked
-- first: ALTER TABLE would take its lock on every CreateSchema. A node of
-- the version before inserts and deletes the rows of (ns, task) as it did,
-- its pauses taking the defaults.
DO $migrate$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '$PAUSED'::regclass AND attname = 'note' AND NOT attisdropped) THEN
		ALTER TABLE $PAUSED ADD COLUMN note text NOT NULL DEFAULT '', ADD COLUMN who text NOT NULL DEFAULT '', ADD COLUMN at bigint;
	END IF;
END
$migrate$;
CREATE TABLE IF NOT EXISTS $RESUMED (
	ns   text NOT NULL,
	task text NOT NULL,
	note text NOT NULL,
	who  text NOT NULL,
	at   bigint,
	PRIMARY KEY (ns, task)
);
CREATE TABLE IF NOT EXISTS $REQUESTS (
	ns   text   NOT NULL,
	task text   NOT NULL,
	at   bigint NOT NULL,
	PRIMARY KEY (ns, task)
);
CREATE TABLE IF NOT EXISTS $RETRIES (
	ns      text    NOT NULL,
	task    text    NOT NULL,
	fire    bigint  NOT NULL,
	attempt integer NOT NULL,
	due     bigint  NOT NULL,
	manual  boolean NOT NULL,
	taken   boolean NOT NULL DEFAULT false,
	PRIMARY KEY (ns, task)
);
CREATE TABLE IF NOT EXISTS $RUNS (
	ns   text      NOT NULL,
	task text      NOT NULL,
	id   bigserial NOT NULL,
	run  text      NOT NULL,
	PRIMARY KEY (ns, task, id)
);
CREATE TABLE IF NOT EXISTS $BACKFILLS (
	ns      text    NOT NULL,
	task    text    NOT NULL,
	id      text    NOT NULL,
	first   bigint  NOT NULL,
	last    bigint  NOT NULL,
	force   boolean NOT NULL,
	overlap text    NOT NULL DEFAULT '',
	total   integer NOT NULL,
	cursor  bigint,
	taken   integer NOT NULL,
	refused integer NOT NULL,
	state   text    NOT NULL,
	node    text    NOT NULL,
	created bigint,
	PRIMARY KEY (ns, task)
);
CREATE TABLE IF NOT EXISTS $RAN (
	ns   text   NOT NULL,
	task text   NOT NULL,
	fire bigint NOT NULL,
	PRIMARY KEY (ns, task, fire)
);
CREATE SEQUENCE IF NOT EXISTS $PAUSES;
CREATE TABLE IF NOT EXISTS $SCHEDULES (
	ns   text  NOT NULL,
	name text  NOT NULL,
	body bytea NOT NULL,
	PRIMARY KEY (ns, name)
);
CREATE TABLE IF NOT EXISTS $GENERATIONS (
	ns        text   NOT NULL PRIMARY KEY,
	schedules bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS $RUNCOUNTS (
	ns      text      NOT NULL,
	task    text      NOT NULL,
	taken   integer   NOT NULL,
	fires   bigint[]  NOT NULL,
	numbers integer[] NOT NULL,
	PRIMARY KEY (ns, task)
);
-- The trail of control actions (AppendEvent, Events): an entry per row,
-- its Seq given by the namespace's row of $EVENTSEQ (the last Seq given),
-- which each append updates in its statement: the row lock, held to the
-- commit, makes the appends commit in the order of their Seqs, so that a
-- reader never sees an entry appear below a Seq it read (a sequence's
-- numbers would not be: a later nextval can commit first). At (Unix
-- nanoseconds). An append trims the namespace's entries to the newest
-- StoreOptions.Trail, and their Keys go with them. These came later too.
CREATE TABLE IF NOT EXISTS $EVENTSEQ (
	ns  text   NOT NULL PRIMARY KEY,
	seq bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS $EVENTS (
	ns     text   NOT NULL,
	seq    bigint NOT NULL,
	key    text   NOT NULL,
	at     bigint NOT NULL,
	node   text   NOT NULL,
	actor  text   NOT NULL,
	action text   NOT NULL,
	target text   NOT NULL,
	note   text   NOT NULL,
	before text   NOT NULL,
	after  text   NOT NULL,
	PRIMARY KEY (ns, seq),
	UNIQUE (ns, key)
);
