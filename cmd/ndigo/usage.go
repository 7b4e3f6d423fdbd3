package main

// defaultAdmin is where the CLI looks without --admin or NDIGO_ADMIN: the
// admin address docs/OPERATIONS.md's examples serve on.
const defaultAdmin = "http://127.0.0.1:8081"

// unknownCommand follows an unknown command's name in its error.
const unknownCommand = "the commands are tasks, runs, audit, next, run, pause, resume, backfill, schedules, schedule create, schedule update, schedule delete, " +
	"calendars, calendar create, calendar update, calendar delete, events and help"

const usage = `Usage: ndigo [flags] COMMAND [NAME]

Commands:
  tasks          list every task: cron, lock, next fire, paused, the last run in the cluster
                 and its attempt, a retry due, its last backfill (running 512/1000: taken or
                 refused of its instants), and the handler of a task that runs a stored
                 schedule (- for a task declared in code); NEXT reads "completed" for a
                 task that fires no more (past its endAt, its one-off instant, its maxRuns)
  runs NAME      list the task's last recorded fires in the cluster, newest first, each
                 with its kind (scheduled, manual, backfill) and attempt (2/4: the first
                 of 3 retries of a failed run); a fire a calendar excluded reads
                 "excluded: calendar NAME"
  audit NAME     what became of each instant of the task's schedule: ran, skipped,
                 failed, missed (no node ran it), excluded (by a calendar of the task:
                 "excluded: calendar NAME", never a miss) or pending; exits 3 if any was
                 missed
  next NAME [-n N]
                 the task's next N instants (default 10, at most 1000): each one's start
                 (shifted by its jitter), SKIP (excluded: calendar NAME, or beyond maxRuns:
                 no node will run it) and DST (what a change of the clocks does to it)
  run NAME       have one node run the task once, as soon as it can, under its lock
  pause NAME [--note TEXT]
                 make every node skip the task's fires until it is resumed; the note, and
                 who paused it ("ndigo CLI (USER)"), stay with the task (ndigo --json tasks,
                 the console)
  resume NAME [--note TEXT]
                 let the task run again from its next fire, with a note as pause keeps one
  backfill NAME --from TIME --to TIME [--force] [--overlap POLICY] [--wait [--poll DURATION]]
                 run the task once for each instant of its schedule from --from to --to
                 (RFC 3339, such as 2026-01-01T00:00:00Z, both included), in order, each on
                 whichever node takes it, under the task's lock; an instant that already ran
                 is refused unless --force; --overlap skip, buffer-one (one at a time) or
                 allow (up to the task's maxConcurrent), by default the task's own. --wait
                 draws its progress on stderr, "[#####...............] 512/1000 (3 refused)
                 running", every --poll (default 1s), until it is done or cancelled.
                 With --json it prints the backfill: as started, or with --wait as it ended
  backfill NAME --cancel
                 cancel the task's running backfill: no node takes its next instant
  schedules      list the stored schedules (tasks declared at runtime) as the node answering
                 sees them: handler, cron, lock, options, args (cut to 40 characters; --json
                 has them whole), when and by which node last stored, and PROBLEM HERE: why
                 that node does not run it (its handler not registered there, say), also
                 warned of on stderr
  schedule create NAME --handler HANDLER --cron EXPR [--lock KEY]
                 [--option KEY=VALUE ...] [--args JSON]
                 store a schedule: every node that registered HANDLER (Scheduler.Handle)
                 runs the task NAME on EXPR ("0 2 * * *", "*/10 * * * * *" with seconds
                 first, "@every 5m"), under the lock KEY if given, with each --option
                 (repeat the flag; the keys of the Scheduled tag, such as lockTtl=5m or
                 overlap=skip), each run handed the JSON value of --args; the node
                 answering runs it from its next fire, the others from their next poll
                 (about a second)
  schedule update NAME [--handler HANDLER] [--cron EXPR] [--lock KEY | --unlocked]
                 [--option KEY=VALUE ...] [--args JSON]
                 change what the flags give and keep the rest of the stored schedule:
                 --unlocked drops its lock (every node then runs each fire), --option
                 KEY=VALUE sets one option and KEY= drops it; the new spec comes in
                 force on every node at once, two polls later (about two seconds);
                 a run of the old in flight finishes
  schedule delete NAME
                 delete the stored schedule: the node answering fires it no more, the others
                 from their next poll; a run in flight finishes; its history stays
  calendars      list the calendars, named exclusions that tasks name with the option
                 calendar: their rules, USED BY (the tasks and calendars that name them),
                 FROM (when their rules came in force on every node) and note
  calendar create NAME [--date DATE ...] [--weekday DAY ...] [--window WINDOW ...]
                 [--cron EXPR ...] [--include CALENDAR ...] [--note TEXT]
  calendar create NAME --file CALENDAR.json
                 define a calendar: every fire of a task naming it that any rule excludes
                 is skipped on every node, recorded "excluded: calendar NAME": --date
                 2026-12-25 (that whole day), --weekday sat, --window 22:00-06:00 (daily,
                 end excluded, may wrap midnight) or 2026-12-24T12:00/2026-12-27T00:00,
                 --cron '0 12 * * *' (the minutes it matches), --include another calendar's
                 rules; each flag repeats. --file reads the JSON {"dates": [...], "weekdays":
                 [...], "windows": [...], "cron": [...], "include": [...], "note": "..."}.
                 Rules are read in the zone of the task that names the calendar
  calendar update NAME (the flags of create, or --file)
                 replace the whole calendar: what the flags do not give is dropped; every
                 node judges the fires by the new rules from the instant the CLI prints
  calendar delete NAME
                 delete the calendar; refused while a task or a calendar names it (the
                 error names them)
  events [--after SEQ] [-n N]
                 the trail of control actions, oldest first, after SEQ (default: the
                 oldest kept), N of them (default 100, at most 1000): each pause, resume,
                 run, backfill and its cancel, and change of a stored schedule or a
                 calendar, by whom (the token's holder), on which node, when, with its
                 note; each command here is kept once (it sends an Idempotency-Key)
  help           print this help

Flags (before or after the command):
  --admin URL        a node's admin address (env NDIGO_ADMIN; default ` + defaultAdmin + `)
  --json             print the server's JSON instead of a table
  --timeout DURATION give up on a request after this long (default 10s)

run, pause, resume, backfill, schedule create, update and delete, and calendar
create, update and delete send the token in the environment variable
NDIGO_ADMIN_TOKEN as a bearer token (the node's admin.token), without leading
or trailing whitespace. The task names . and .. go in the query; no stored
schedule or calendar can have them.
Exit status: 0 done, 1 the request failed, 2 a usage error, 3 an audit found
missed fires, 4 a backfill waited for (--wait) was cancelled.
`
