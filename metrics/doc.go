// Package metrics exposes what ndigo's scheduler and locks do as Prometheus
// metrics (github.com/prometheus/client_golang), on a registry the
// application passes or the default one.
//
// Lock attempts, from a driver wrapped by [Metrics.InstrumentDriver]:
//
//	ndigo_lock_attempts_total{outcome="acquired|held|error"}
//	ndigo_lock_acquire_duration_seconds          histogram
//
// Fires, runs and skips, from the scheduler's listener hook
// (scheduling.Listener), by task name:
//
//	ndigo_task_fires_total{task}
//	ndigo_task_runs_total{task, outcome="ok|error|panic|cancelled"}
//	ndigo_task_skips_total{task, reason="lock_held|still_running|lock_pending|already_run|missed|paused|not_owner|retrying|buffered|one_waiting|no_driver|lock_error"}
//	ndigo_task_retries_total{task}               retry attempts run (scheduling.Retry: attempt 2 or later of a fire), also in runs_total
//	ndigo_task_backfill_runs_total{task}         runs of backfill instants (scheduling.Scheduler.Backfill), also in runs_total, not in lateness
//	ndigo_task_run_duration_seconds{task}        histogram
//	ndigo_task_lateness_seconds{task}            histogram: run start minus the scheduled instant
//	ndigo_leases_lost_total{task}                the lease ended before the task returned
//	ndigo_lease_renewals_failed_total{task}
//
// A fire skipped because a retry of an earlier one was pending counts as
// reason "retrying"; ndigo_task_retries_total over ndigo_task_runs_total
// is the share of runs that were retries.
//
// With scheduling.Overlap, a fire that finds a run of its task going and
// waits for it (buffer-one, cancel-previous) counts as reason "buffered"
// when it starts to wait, and its run, once the run going ended, as a run
// (of attempt 1: not a retry), so that the fire counts twice in
// ndigo_task_fires_total, as a retried one does; a fire skipped because
// another already waited counts as reason "one_waiting". A run that a
// later fire cancelled (cancel-previous) counts under outcome "cancelled",
// as one that Stop cut at its deadline.
//
// What the cluster's audit of each task finds ([AuditCollector], at
// scrape time, each task's audit kept a minute): alert on a schedule that
// falls silent with ndigo_task_missed_fires > 0, and on the store itself
// with ndigo_audit_up == 0:
//
//	ndigo_task_missed_fires{task}                          fires that ran nowhere, over the history's span
//	ndigo_task_last_missed_fire_timestamp_seconds{task}    the newest of them; absent while none
//	ndigo_audit_up                                         0 when some task's history could not be read
//	ndigo_task_health{task, state}                         1 for the task's health state, 0 for the others
//
// The health (scheduling.Scheduler.Health) is derived with each task's
// audit: state is one of ok, late, failing, overrun, down, paused,
// completed and unknown (its history unreadable), every one a series, so
// that an alert on ndigo_task_health{state=~"late|failing|overrun|down"} == 1
// fires on each task's state and clears when it changes.
//
// The backends the scheduler runs on ([BackendCollector], checked at each
// scrape as /healthz checks them; a backend kept in the process is always
// up): alert on ndigo_backend_up == 0:
//
//	ndigo_backend_up{backend="locks|taskstate"}            1 if its health check passed, 0 if not
//
// The pings to the monitor outside the cluster (package ping;
// [PingCollector]), when the application sends them:
//
//	ndigo_pings_total                                      pings sent
//	ndigo_ping_failures_total                              those that failed
//	ndigo_ping_last_success_timestamp_seconds              when the last one succeeded; absent until one did
//
// Lock keys are not labels: fire claims name their instant, so keys are
// unbounded. Task names are bounded by the application's code.
//
// With app.Module, the configuration's admin.metrics turns metrics on, in a
// registry served at /metrics on the admin address. With fx and a registry
// of your own, include [Module]; without fx, call [New] and pass the result
// in scheduling.Config.Listeners and its InstrumentDriver(d) as the driver.
package metrics
