// Package scheduling runs cron-scheduled tasks, each optionally guarded by a
// fencing-token lease so that a fire runs on exactly one node of a cluster.
//
// A task is a func(context.Context) error plus a spec built from options:
//
//	scheduling.Scheduled(c.CloseBooks,
//		scheduling.Cron("0 2 * * *"),
//		scheduling.Lock("payroll-window"),
//		scheduling.LockTTL(time.Minute))
//
// Package annotations reads the same spec from struct tags. Both forms become
// one spec, validated when the task is added (by [Scheduler.Add], or by
// [Module] when the fx application is built): every invalid spec is reported
// at once, naming the controller type, the method, the option, the value and
// the rule.
//
// # Schedules
//
// Cron expressions are parsed by github.com/robfig/cron/v3: five fields or six
// with a leading seconds field, descriptors such as @hourly, and a CRON_TZ=
// (or TZ=) prefix naming the zone; without one, [Config.Location] applies
// (default time.Local). "@every D" fires on a grid of multiples of D since the
// Unix epoch, so every node computes the same instants whatever its start
// time; the grid is absolute, so "@every 24h" fires at 00:00 UTC.
//
// Daylight saving time: a spec whose hour field names particular hours (say
// "30 2 * * *") follows the wall clock. When clocks fall back, a wall time
// that occurs twice fires once, at its first occurrence. When clocks spring
// forward, a wall time inside the skipped gap fires once, at the first
// instant after the gap (03:00 for a 02:30 job on a 02:00→03:00 jump), so a
// daily job never loses a day. A spec that runs every hour ("*/15 * * * *",
// @hourly) follows elapsed time instead: it fires through the repeated hour
// and has nothing to fire in the skipped one.
//
// A fire that was missed entirely (the process was paused past it) is not
// caught up: the schedule resumes at the next instant after now.
//
// # Runs
//
// One timer serves the whole schedule (a heap of next fires); idle tasks cost
// no goroutine. At each fire, due tasks are dispatched in registration order;
// locked tasks acquire their lease before the run, in that order, so that of
// two tasks sharing a lock on one node the earlier-registered one wins and the
// other skips. Runs then proceed concurrently, each in its own goroutine.
//
// A locked run:
//   - acquires the lock with locks.Wait (LockWait budget, LockWaitStep polls);
//     on contention the fire is skipped and logged as "lock 'x' is held";
//   - claims the fire under the key "<lock>@<fire unix ms>:<task>",
//     with a TTL of one period capped at [MaxClaimTTL]. The claim outlives
//     the run: a node whose clock lags and that reaches the same fire after
//     a fast run on another node released the lock finds the claim and skips
//     ("already run"). So each fire runs at most once across nodes whose
//     clocks differ by less than that TTL (less scheduling jitter), without
//     holding the lock for the period.
//     With a driver that has marks ([locks.Marker], as the Redis driver
//     does), the claim is a mark that simply expires; otherwise it is a lease
//     that the node releases when it claims its next fire, so claims do not
//     pile up;
//   - runs with a context that carries the lease ([locks.FromContext]) and the
//     [Run] ([RunFromContext]), and that is cancelled when the lease is lost
//     or MaxRunTime passes on the injected clock;
//   - releases the lease in a defer, also when the task returns an error or
//     panics; a panic is recovered and logged with the task name.
//
// A task never overlaps itself on one node: a fire that finds the previous
// run still going is skipped and logged.
//
// # Listeners
//
// A [Listener] is told before and after every run and about every skipped
// fire, with an [Event]: the task, lock, fire, token, outcome, error,
// lateness, duration, and whether the lease was lost or its renewal failed.
// Pass listeners in [Config.Listeners], or register them with [Listen] for
// [Module]. Package metrics and package tracing are listeners; a team that
// wants to page on repeated skips writes one of a few lines.
//
// # Logging
//
// Everything is logged through log/slog with the task name under the key
// "task". A nil [Config.Logger] means slog.Default(). Skips are logged at
// Info ("lock 'x' is held", "fire already run on another node", "previous
// run still going"); lock failures, task errors, panics and renewal
// failures at Error; a lease lost under a run at Warn; the acquisition
// (with its token), lock waits, and each run's start and end (with its
// duration and token) at Debug; the run lines are written when the logger
// takes debug records at [New], so that runs nobody observes pay nothing. Log lines carry task names, lock keys,
// fire instants, tokens and errors, never a driver's connection settings.
package scheduling
