// Package annotations declares scheduled tasks with struct tags on a
// controller type: a marker field of type [Scheduled] per task, whose tags
// name the method and set the options of package scheduling.
//
//	type PayrollController struct {
//		_ annotations.Scheduled `method:"CloseBooks" cron:"0 2 * * *" lock:"payroll-window" lockTtl:"60s"`
//		_ annotations.Scheduled `method:"SendPayslips" cron:"0 8 1 * *"`
//	}
//
//	func (c *PayrollController) CloseBooks(ctx context.Context) error { ... }
//
// Tag keys:
//
//	method        the method to run: func(context.Context) error (required)
//	cron          the schedule, as scheduling.Cron (required)
//	lock          the lock key, as scheduling.Lock
//	lockWait      wait budget for a held lock (default: skip)
//	lockWaitStep  poll interval while waiting (default 100ms)
//	lockTtl       lease duration (default 60s)
//	maxRunTime    run context deadline
//	renew         "true" to extend the lease while the run lasts
//	catchUp       "skip" (default) or a window: run the last fire missed while no node ran
//	jitter        start each fire up to this long after its instant, as scheduling.Jitter
//	dst           daylight-saving policy, as scheduling.DST (default "once,shift")
//	overlap       skip (default), buffer-one, cancel-previous or allow, as scheduling.Overlap
//	maxConcurrent with overlap allow, the runs at once in the cluster, as scheduling.MaxConcurrent
//	retry         retries of a failed run per fire, as scheduling.Retry (needs lock)
//	retryBackoff  backoff before the first retry, doubled for each next (default 10s)
//	retryMaxBackoff  cap of that backoff (default 100 × retryBackoff, at most 24h)
//	calendar      calendars whose exclusions the fires skip, "eu-holidays,weekends", as scheduling.Calendar
//	startAt       first instant the task may fire at, as scheduling.StartAt
//	endAt         the task fires only before this, as scheduling.EndAt
//	maxRuns       runs the task makes in the cluster, as scheduling.MaxRuns (needs lock)
//	pauseAfterFailures  pause after this many failed fires in a row, as scheduling.PauseAfterFailures
//	lateAfter     a fire's grace before the task's health is late, as scheduling.LateAfter
//	downAfter     how long a fire may not start before the task is down, as scheduling.DownAfter
//	failingAfter  failed fires in a row that make the task failing (default 1), as scheduling.FailingAfter
//	runBudget     how long a run may go before the task is overrun, as scheduling.RunBudget
//	name          task name (default "Type.Method", Type declaring Method)
//
// Values may hold ${path} placeholders, resolved from the configuration
// (an annotations.Resolver; app.Module makes config.Module's values one) when the tasks are built, as
// Spring's @Scheduled(cron = "${...}") does; ${path:default} gives a
// default. A problem with a value read that way names the placeholder and,
// when the Resolver is a [SourceResolver] (app.Module's is), where the
// setting was set: (from ${payroll.cron}, set by env APP_PAYROLL_CRON).
// Durations take two forms: a Go duration ("5s", "1m30s") or a whole
// number of milliseconds ("500"). Any other key is an error, with a
// suggestion when it looks like a known one (lockTTL: did you mean lockTtl?).
//
// [Controller] registers a controller's tasks with scheduling.Module; [Tasks]
// builds them without fx. Both report every problem of every field at once,
// through the same validation as the builder form.
package annotations
