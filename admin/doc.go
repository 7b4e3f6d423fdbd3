// Package admin serves what a node's scheduler knows over HTTP: its tasks
// (GET /scheduledtasks), the leases it holds (GET /locks) and the health of
// its dependencies (GET /healthz), as JSON with RFC 3339 timestamps.
//
// /healthz answers 503 when any check fails, naming it: [Module] checks
// the lock driver ("locks") and the task state store ("taskstate") that
// the scheduler runs on, whenever they implement locks.HealthChecker, as
// the Redis and PostgreSQL ones do ([BackendChecks]), so a node whose
// database is down says so while every fire fails.
//
// [Handler] is an http.Handler to mount on the application's own mux;
// [Module] provides it from the fx graph and, given a [Config] with an
// address, serves it there with a lifecycle-managed server. app.Module
// includes Module, with the Config from the configuration's admin.addr.
//
// With the admin token, POST /scheduledtasks/{name}/run, pause and resume
// control a task cluster-wide, and POST /scheduledtasks/{name}/backfill
// runs it once for each instant of its schedule in a past range
// (scheduling.Scheduler.Backfill), with a JSON body {"from", "to",
// "force", "overlap"}; /cancel-backfill cancels it. Every node shows the
// backfill's progress as its task's "backfill" in GET /scheduledtasks,
// and each run of it in the histories with "backfill": true.
//
// Stored schedules (GET, POST /schedules; PUT, DELETE /schedules/{name})
// are tasks declared at runtime. Calendars (GET, POST /calendars; GET,
// PUT, DELETE /calendars/{name}) are named exclusions (dates, weekdays,
// daily or dated windows, cron minutes, other calendars included) that
// tasks name with the option calendar: no node runs a fire a calendar
// excludes, and the histories and the audit show it as excluded by its
// calendar, never missed. GET /scheduledtasks/{name}/next?n=10 previews a
// task's next instants, each with its jittered start, the calendar that
// excludes it, and what a change of the clocks does to it; a task past its
// endAt, its one-off instant or its maxRuns is listed "completed".
//
// GET / is a web console for the same endpoints: one embedded page, with no
// asset from elsewhere, that lists the tasks and their last runs and asks
// for the admin token before it changes anything; it shows each task's
// backfill, with its progress, and cancels it; its next fires; and the
// stored schedules and calendars, which it creates, edits and deletes.
//
// The endpoints show task names, lock keys, tokens and task error messages:
// serve them on an internal address.
package admin
