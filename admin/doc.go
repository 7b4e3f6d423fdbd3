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
// GET / is a web console for the same endpoints: one embedded page, with no
// asset from elsewhere, that lists the tasks and their last runs and asks
// for the admin token before it changes anything; it shows each task's
// backfill, with its progress, and cancels it.
//
// The endpoints show task names, lock keys, tokens and task error messages:
// serve them on an internal address.
package admin
