-- The task state (taskstate.Store) of every namespace: the paused tasks, the
-- pending manual-run requests (at: Unix nanoseconds), each task's last
-- retry, pending or taken (fire and due: Unix nanoseconds), and the newest
-- runs of
-- each task (run: JSON), at most the store's history length per task plus
-- one per concurrent writer. SetPaused draws from the pauses sequence, whose
-- last value is the pause generation (taskstate.Poll.Pauses).
CREATE TABLE IF NOT EXISTS $PAUSED (
	ns   text NOT NULL,
	task text NOT NULL,
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
CREATE SEQUENCE IF NOT EXISTS $PAUSES;
