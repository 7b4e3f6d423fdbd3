package main

// defaultAdmin is where the CLI looks without --admin or NDIGO_ADMIN: the
// admin address docs/OPERATIONS.md's examples serve on.
const defaultAdmin = "http://127.0.0.1:8081"

// unknownCommand follows an unknown command's name in its error.
const unknownCommand = "the commands are tasks, runs, audit, run, pause, resume and help"

const usage = `Usage: ndigo [flags] COMMAND [NAME]

Commands:
  tasks          list every task: cron, lock, next fire, paused, the last run in the cluster
                 and its attempt, a retry due
  runs NAME      list the task's last recorded fires in the cluster, newest first, each
                 with its attempt (2/4: the first of 3 retries of a failed run)
  audit NAME     what became of each instant of the task's schedule: ran, skipped,
                 failed, missed (no node ran it) or pending; exits 3 if any was missed
  run NAME       have one node run the task once, as soon as it can, under its lock
  pause NAME     make every node skip the task's fires until it is resumed
  resume NAME    let the task run again from its next fire
  help           print this help

Flags (before or after the command):
  --admin URL        a node's admin address (env NDIGO_ADMIN; default ` + defaultAdmin + `)
  --json             print the server's JSON instead of a table
  --timeout DURATION give up on a request after this long (default 10s)

run, pause and resume send the token in the environment variable
NDIGO_ADMIN_TOKEN as a bearer token (the node's admin.token), without
leading or trailing whitespace. The task names . and .. go in the query.
Exit status: 0 done, 1 the request failed, 2 a usage error, 3 an audit found
missed fires.
`
