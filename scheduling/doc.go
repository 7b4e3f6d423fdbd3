// Package scheduling runs cron-scheduled tasks, each optionally guarded by a
// fencing-token lease so that a fire runs on exactly one node of a cluster.
//
// A task is a func(context.Context) error plus a spec built from options:
//
//	scheduling.NewTask(c.CloseBooks,
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
// time; the grid is absolute, so "@every 24h" fires at 00:00 UTC. H in a
// field ("H * * * *", "H(0-29) 2 * * *", "H/15 * * * *") is a value that a
// hash of the task's name picks in the field (see [Cron]): a hundred tasks
// on "H * * * *" fire at their own minutes, the same on every node,
// instead of all at :00. "@at T [Zone]" fires once, at T: an RFC 3339
// instant, or a wall time or a date in Zone (by default the location's).
//
// Daylight saving time: a spec whose hour field names particular hours (say
// "30 2 * * *") follows the wall clock, under the task's [DST] policy. By
// default ("once,shift"), when clocks fall back, a wall time that occurs
// twice fires once, at its first occurrence; when clocks spring forward, a
// wall time inside the skipped gap fires once, at the first instant after
// the gap (03:00 for a 02:30 job on a 02:00→03:00 jump), so a daily job
// never loses a day. "twice" fires both occurrences of a repeated wall time,
// "skip" does not fire a skipped one. A spec that runs every hour ("*/15 * * * *",
// @hourly) follows elapsed time instead: it fires through the repeated hour
// and has nothing to fire in the skipped one.
//
// A fire that was missed entirely (the process was paused past it and past
// the fire after it) is not caught up: the schedule resumes at the next
// instant after now.
//
// # Runs
//
// One timer serves the whole schedule (a heap of next fires); idle tasks cost
// no goroutine. At each fire, every due task gets a goroutine that owns the
// fire from start to end: the single-flight check, the pause rule, the lock,
// the claim, the lease check, the run, the renewal, the release and the
// record. Every run takes this one path, whatever started it: its schedule, a
// catch-up when a node starts, or an operator ([Scheduler.RunNow]); what
// differs is data (the run's kind and instant), so a rule added to the path
// holds for every kind of run. Locked tasks due together that share a lock
// key make their first lock attempt in registration order and start their
// runs only when all of them have made it, so that of two tasks sharing a
// lock on one node the earlier-registered one wins and the other skips;
// tasks on other keys do not wait for them. Runs then proceed concurrently.
//
// A locked fire:
//   - acquires the lock, each driver call bounded by the lock TTL; on
//     contention the fire is skipped and logged as "lock 'x' is held", or,
//     with LockWait, waits up to that budget (LockWaitStep polls, or at once
//     on release with a [locks.Watcher] driver);
//   - claims the fire: the driver ([locks.Claimer]) keeps, per task, the
//     latest fire claimed in the cluster, and refuses a claim of that fire or
//     an earlier one, so the fire is skipped as "already claimed by another
//     node". A fire is its task's name and its instant, whatever its spec:
//     the claim's key is "@" and the task's name, the same for every lock,
//     cron and option, and every kind of run that runs an instant claims it
//     there (a backfill's too). The claim is made while the lease is held,
//     or, for a fire that waits for its lock, before the wait;
//   - runs with a context that carries the lease ([locks.FromContext]) and the
//     [Run] ([RunFromContext]), and that is cancelled when the lease ends or
//     MaxRunTime passes on the injected clock;
//   - with Renew, extends the lease every third of the lock TTL;
//   - releases the lease when the task returns, errors or panics, once a
//     Record call carried the run to the task state (not waiting for one
//     the store refused): the next holder of the lock finds the run in the
//     shared history; a panic is recovered and logged with the task name.
//
// A task never overlaps itself on one node: a fire that finds the previous
// one still running, or still waiting for its lock, is skipped and logged.
//
// # At most once per fire
//
// A fire of a locked task runs at most once across every node that shares
// the driver, whatever the run length (several periods), LockWait (longer
// than the period), Renew, and the nodes' clocks. The claim carries it: a
// node that reaches a fire after another node ran it, or got the lock after
// another node's run of it, finds the fire claimed. Nodes whose clocks
// differ need no bound for this; a bound only matters for liveness, below.
//
// The rule's one limit is the claim record's life, [ClaimTTL] (24h after the
// task's latest claim): a node skips, as missed, a fire it reaches more than
// [MaxClaimLateness] (12h) after its instant, so that no claim is tried
// after the record could have expired. A driver that loses its records (a
// Redis restart without persistence, a failover to a replica that lacks
// them) loses this guarantee for the fires in flight; see the driver.
//
// Cost per fire, per node: one Acquire and one Claim for the node that wins
// the lock; one Acquire for a node that finds it held; with LockWait, one
// Acquire, one Claim and the wait's polls for the node that waits; one
// Release after the run. With a task state store, every node also reads the
// paused flag, and the winner records the run: on N nodes a locked fire
// costs 2N+3 round trips, unless the nodes spread their tasks (below). One
// claim record per
// task, whatever the number of fires.
//
// Liveness: a fire that no fault touches (every node up, the driver
// answering) runs exactly once if its lock is free when the first node
// reaches it. If the lock frees later (a run of another fire ends), a node
// that reaches the fire afterwards still runs it, as long as the nodes'
// clocks differ by less than half the period: a node further ahead may
// claim the next fire first, and then this one is refused.
//
// The driver must keep claims: a locked task is refused at Add when the
// driver is not a [locks.Claimer], and a driver wrapper keeps the claims of
// the driver it wraps by implementing Claim or by unwrapping to it
// ([locks.Wrapper]). Package schedulingtest holds a cluster simulation that
// checks these rules over many thousand fires with faults.
//
// # Spreading
//
// With [Config.Spread] (scheduling.Module's default on a Redis or
// PostgreSQL driver, see [SpreadMode]), the nodes share out the fires of
// locked tasks instead of all trying each: every node renews its
// membership of a group, the nodes with the same locked tasks, through the
// driver ([locks.Membership]) every [Config.Heartbeat] (1s), and tries only
// the fires of the lock keys that rendezvous hashing gives it among the
// members it has seen in two heartbeats running (itself, and in its first
// view every member listed).
// The other nodes skip those fires with [OutcomeNotOwner], making no call.
// Tasks that share a lock key have one owner, so their registration order
// holds. Ownership decides who tries, never who may run: the lock and the
// claim still decide that, so a fire that two nodes try while their views
// differ runs once, and the rules above hold unchanged.
//
// Ownership changes with the members:
//   - a node that joins tries every fire until its first heartbeat answers,
//     then its share, while the others hand it that share only at their
//     second view of it, so no fire falls between (and a fleet that starts
//     at once does not try every fire on every node for a heartbeat);
//   - a node that stops hands its tasks over: it stops heartbeating,
//     leaves its group, and goes on running its fires for two heartbeats,
//     by which the others have seen it gone and taken its tasks, and only
//     then starts no new run; so a rolling deploy's fires run on time, each
//     once (the claims decide between the leaving node and the taker). A
//     fire the others could not take in time (their heartbeats slow or
//     failing) runs late (see A dead owner's fires below);
//   - a node that dies (or is paused, or cut off) keeps its tasks until its
//     membership lapses, three heartbeats after its last, and the others
//     see it gone at their next: four heartbeats, which the default
//     heartbeat keeps within the shortest lock TTL (1s, or a quarter of the
//     shortest lock TTL down to [MinAutoHeartbeat], among the tasks the
//     node has at the time: a task added after Start or a stored schedule
//     counts from when the node has it). So its tasks run
//     again on the others within a lock TTL plus a period of its death
//     (with a TTL shorter than 400ms, 400ms plus a period), and the fires
//     due meanwhile run late (below); when it comes back, it
//     tries the tasks of its last view (which the others may own by now:
//     the lock and the claim decide) until its next heartbeat;
//   - a node whose heartbeats fail keeps its last view, and so its tasks,
//     while the others take them too once its membership lapses: trying
//     every fire instead would multiply the calls of a node that fails
//     because it is overloaded (30 nodes with 1,000 tasks on 2 cores did,
//     and never recovered). Only a node that has had no view yet (its first
//     heartbeat failed) tries every fire. If every node's heartbeats fail
//     and one dies meanwhile, its tasks wait for the heartbeats to work
//     again: the membership and the locks are in one store, so this takes
//     a store whose lock calls work while its membership calls fail.
//
// No fire is missed across a join as long as the nodes' clocks and a
// heartbeat's latency differ by less than a heartbeat interval.
//
// A dead owner's fires are late, not lost. The node that takes over the
// tasks of a member that left (a membership change, not a join: a join
// loses nothing) runs the fires of each that fell due since the member's
// last heartbeat and that it had not tried, once each, oldest first, then
// the task's own fires, through the one fire path as catch-up fires of
// their instants: the history and the audit have them as ran, with their
// lateness ([Event].Lateness, and the Info line "running a fire late after
// a takeover"). Each claims its instant, so a fire the member claimed,
// ran or was running is refused and skipped, unrecorded: at most once
// wins. As claims are monotonic, a scheduled fire due while late ones wait
// joins them, after them, and runs in its turn as it would have run on
// time (it waits or buffers as its spec says, and its skips are recorded),
// so that the fires due under a dead member's lease run once it lapses;
// one due after the chain's deadline (below) while the chain goes on is
// skipped as a fire that finds the run before it going ([OutcomeRunning]).
// A late fire whose lock is held (the member died
// holding its lease, a run going until its lock TTL) neither waits nor
// claims: it is tried again every heartbeat until the lease lapses. So a
// late fire runs within four heartbeats of its instant plus the lock step
// (within the lock TTL, as the heartbeat is at most a quarter of it), or,
// behind a dead member's lease, within a lock TTL of the death plus a
// heartbeat. One still pending a lock TTL and two heartbeats after the
// takeover (a live holder keeps the key) is recorded [OutcomeMissed], which
// the audit reports; a takeover keeps at most 1,000 late fires per task,
// the newest, and the audit finds the older ones missed.
//
// # Cost per fire
//
// What one locked fire costs, on N nodes spreading F locked fires a second
// of T tasks, with a task state store (a driver and a store on one server,
// as the modules give them), a node owning F/N fires a second, k of them
// due at each instant:
//   - the owner's lock step: the lease and the fire's claim of all k fires
//     in one call ([locks.AcquireClaims], a lock batch: one round trip for
//     up to 256 fires on a single Redis and on PostgreSQL; on a Redis
//     Cluster or Ring two round trips per fire, the claim key being
//     elsewhere), 1/k round trips per fire; fires that share a lock key
//     take turns in calls of their own; fires of j lock TTLs due at one
//     instant make j calls, at once, each bounded by its fires' TTL, so
//     that a slow call fails no fire whose own TTL it did not outlast (j/k
//     per fire; a fire alone with its TTL makes its own);
//   - the owner's Release: 1 round trip, made once every run of the batch
//     has started; a locked run's own release waits for the Record call
//     that carries its record to return (no call of its own, but the lease
//     is held one Record round trip, and up to the recorder's 2ms linger,
//     past the run's end, so that the next holder sees the run recorded);
//   - its record in the shared history: one Record call per node for the
//     runs that end together, 1/k per fire (the recorder waits up to 2ms
//     for the runs going on its node);
//   - the paused flag: no call, a node keeping the flags it read until the
//     store's pause generation moves on (see Control and history);
//   - per node, one heartbeat per [Config.Heartbeat] and one poll (manual
//     requests, pending retries, backfills and the pause and stored
//     schedules' generations, one call: on Redis a pipeline of five
//     commands) per [Config.RequestPoll]: N·(1/Heartbeat + 1/RequestPoll)/F
//     per fire, and one read of the stored schedules per node when they
//     change (see Stored schedules);
//   - a backfill's instant: what a retry's attempt costs, and its claim
//     (see Backfill);
//   - a failed run of a task that retries: its retry rides in the failure's
//     record (no call of its own), and each retry costs the owner what a
//     manual run does, an Acquire, a take of the attempt and a Release (3
//     round trips), with its record; the other nodes nothing, as for any
//     fire;
//   - the other nodes: nothing, not even a record: the audit derives a
//     fire lost to another holder (see History and audit); a paused fire
//     costs one record (its claimer's), a failed one a record per node that
//     had the failure;
//   - a task with calendars: no call for a fire they let run (the rules
//     are read with the stored schedules, not per fire); an excluded fire
//     costs what a paused one does, its claim and one record by its
//     claimer (every node's, for an unlocked task);
//   - a task with [MaxRuns]: one more store call per fire, the owner's
//     TakeRun under its lease (a round trip of its own, not batched);
//   - a task with [PauseAfterFailures]: after a failed run only, one
//     history read, and a SetPaused when the failures reach N;
//   - an audit (on demand, or per task per minute per node that
//     metrics.AuditCollector is scraped on): one history read per task on
//     the lock key, not per fire.
//
// That is 1 + 2/k + N·(1/Heartbeat + 1/RequestPoll)/F round trips per
// fire, k being about F/N fires per instant: 1.04 at 1 node and 100 fires
// a second, 1.4 at 10 nodes and 100, 2.2 at 30 and 100, 1.05 at 10 and
// 1,000 (bench/cmd/scalebench measures these, beside gocron's per-job
// locker at N+1 and leader election at N/F). Without spreading every node tries every
// fire: 1 + 2/k for the winner plus 1/k per other node. On Redis the
// owner's commands are 16 per fire (scripts included): GET of the claim
// and the lock, SET of the token counter, the lease and the claim in the
// lock step (one TIME per batch); GET and DEL of the lease and LPUSH and
// PTTL of the tombstone list in the release; the record. On PostgreSQL, one function call per batch and
// one per release. A membership change costs each node one Info line and,
// for each task it takes over from a node that left, the lock step of each
// fire due since that node's last heartbeat (four heartbeats' worth), one
// after another, the refused ones costing no record.
//
// # Leases
//
// A lock TTL must exceed the driver's minimum ([locks.MinTTLer]: the Redis
// driver's drift margin), and be at least [MinRenewTTL] with Renew; a
// LockWaitStep must be at least [MinLockWaitStep]. A renewal that fails
// without finding the lease lost (the driver was slow or unreachable) is
// retried every twelfth of the TTL, each attempt bounded by a sixth, while
// the lease lasts. The run is cancelled with cause locks.ErrLeaseLost when
// the lease is found lost or expires (a paused process), and with an error
// wrapping [ErrRenewalFailed] and the driver's error when it ran out after
// a renewal attempt had failed and no retry got through in time.
//
// # Control and history
//
// With a task state store ([Config.State], a taskstate.Store that the nodes
// share; [Module] takes it from the graph), operators control tasks across
// the cluster. [Scheduler.Pause] makes every node skip the task's fires
// ([OutcomePaused]) until [Scheduler.Resume]: the node asked from its next
// fire, the others from their next poll ([Config.RequestPoll]), where they
// read the store's pause generation ([taskstate.Poll]) and forget the
// flags they kept; a node reads a task's flag once per generation (or per
// [PauseFlagAge]), not at every fire. A node whose poll failed reads the
// flag at every fire until a poll succeeds, and a node that cannot read the
// flag fails the fire instead of running it. A fire skipped while paused
// is claimed, so that no node catches it up after the resume.
// [Scheduler.RunNow] records a request that one node runs once, as soon as
// it holds the task's lock, with [Run].Manual set: the nodes look for
// requests every [Config.RequestPoll], on the loop's own timer, and take a
// request only while holding the lock (the take is a manual run's claim),
// so a manual run is fenced, checked against its lease's end like any fire,
// and never overlaps another run of the lock. A request that a node took is
// recorded in the store's history with the outcome of its run, or of the
// lock step that failed after the take. A locked task with a [CatchUp]
// window runs, when a node starts, its most recent fire within the window
// if no node claimed it. Each store call of a fire is bounded by the task's
// lock TTL (5s for an unlocked task, and for a record).
//
// # Retries
//
// A locked task with [Retry] runs a failed run of a fire again, up to the
// given number of times, each after a backoff that doubles from
// [RetryBackoff] up to [RetryMaxBackoff], drawn in [0, that) (full jitter).
// The failed run's record leaves the retry pending in the store, in the
// same step (taskstate.TaskRun.Retry), so that it is never pending without
// the failure it retries and survives the node that failed: every node
// reads the pending retries at its poll, and the first to hold the task's
// lock once the retry is due takes the attempt from the store (the take is
// a retry's claim, as for a manual run) and runs it through the same steps
// as every fire, with [Run].Attempt k+1 and a fencing token above every
// earlier attempt's. An attempt thus runs at most once, and never overlaps
// another run of the lock. A scheduled fire due while a retry of an earlier
// fire is pending is skipped ([OutcomeRetrying]) and claimed, as a fire
// that finds the previous run still going is; a node learns of a retry
// that another node left at its next poll, so a fire within a poll of the
// failure may still run before the retry. A paused task's retry is taken
// and recorded as paused: it does not run after the resume.
//
// # Overlap
//
// [Overlap] sets what a locked task's fire does when a run of the task is
// going on any node (its lock is held): skip it (the default); buffer-one,
// wait and run once the run ends, at most one fire waiting; cancel-previous,
// cancel the run going, then run; allow, run beside it, up to
// [MaxConcurrent] runs at once. A fire that waits is claimed (so that no
// other node waits for it too), recorded as [OutcomeBuffered], and left
// pending in the task state as the retries are (attempt 1): the node that
// holds the lock once the run ended takes it at its poll and runs it, with
// the fire's instant as its [Run].Fire, so it still runs at most once. A
// fire due while one waits is skipped ([OutcomeBufferFull]): the store
// leaves a fire waiting only if none waits (taskstate.Store.LeaveWaiting,
// one round trip on the buffering node, on that path only), so one waits
// in the cluster whatever node each fire finds the run going on. Under
// cancel-previous the node that buffers a fire cancels the runs of earlier
// fires going on it at once, and every other node at its next poll (it
// reads the pending runs there), with the cause [ErrSuperseded]; such a run
// is recorded as cancelled and not retried. A pause drops a fire left
// waiting: the first node to poll it takes it and records it paused (as a
// paused retry is), and a run going on a node that had not polled it yet
// goes on, as every run in flight does through a pause. Under allow the
// lock key has MaxConcurrent slots ([locks.AcquireSlot]): a fire takes the
// first free slot and claims itself in one driver call (on a driver that
// takes many fires in one, one round trip), with the slot key's own fencing
// token.
//
// # Backfill
//
// [Scheduler.Backfill] runs a locked task once for each instant of its
// schedule in a past range, in order, through the same steps as every fire:
// the hold rules (a paused task's backfill waits for the resume), the lock
// with its fencing token, the take of the instant from the task state (the
// backfill's claim: taskstate.Store.TakeBackfill moves the backfill's
// cursor past it, once, whichever nodes race for it), renewal and the
// record, with [Run].Backfill set and the instant as [Run].Fire. The
// backfill and its cursor live in the task state, so it survives the node
// driving it: every node that has the task reads it at each poll, and the
// one that can take the next instant goes on from the cursor (with
// [Config.Spread], the task's owner). An instant that already ran (taken by
// an earlier backfill, or in the task's kept history when the backfill
// started) is refused unless [BackfillOptions].Force; a scheduled fire
// whose run the kept history no longer holds is not known to have run. Instants run one at a time, each once the lock is
// free (a backfill's instant waits for the lock rather than be skipped),
// or, under the allow policy, up to MaxConcurrent at once. A failed
// instant is recorded and not retried; [Scheduler.CancelBackfill] stops
// the takes, and a run in flight finishes. Each instant costs its node what
// a manual run does and the instant's claim (an Acquire, the claim, the
// take, a Release and the record: 4 round trips and a share of a Record),
// the other nodes one Acquire per
// poll while the lock is held, nothing otherwise.
//
// # Stored schedules
//
// A task can also be declared at runtime, without a deploy: a stored
// schedule (taskstate.Schedule: a name, a handler, a cron expression, a
// lock, options by the Scheduled tag's keys, and arguments as a small JSON
// value) that [Scheduler.CreateSchedule] keeps in the task state, and that
// every node runs as a task of its own with the handler registered there
// under that name ([Scheduler.Handle], or [Handler] through fx), each run
// calling it with the arguments. It is validated as [Scheduler.Add]
// validates a task, with the same [ValidationError]. Every node reads the
// stored schedules when the generation that its poll reads changes
// (taskstate.Poll.Schedules), and applies them: a new one runs from its
// next fire, an update replaces the task's spec from its next fire (a run
// of the old spec in flight goes on, and counts as the task's run going),
// a deleted one fires no more (its run in flight finishes); this node at
// once, the others within a poll. A node's first poll after Start catches
// up the missed fire of a stored schedule with a catch-up window, as Start
// does for the tasks declared in code. A node that lacks the handler (an older
// build, during a rolling deploy), or on which the name is a task declared
// in code, or whose rules the schedule breaks, does not run it, logs why
// once, and lists it with its problem ([Scheduler.Schedules]); the nodes
// that can run it do, each fire once as for any task. With [Config.Spread],
// a change of a locked schedule moves every node to another group (the
// nodes with the same locked tasks, see Spreading) as it applies it: for up
// to a poll, until every node did, a fire may be tried by one node of each
// group, and still runs once. Tasks declared in code cannot be deleted or
// replaced at runtime. A stored schedule costs no
// driver or store call per fire beyond a task's; a change costs every node
// one read of the stored schedules, and every poll one more command (on
// Redis, in its pipeline: 5 in all).
//
// # Calendars, bounds and runs
//
// A calendar (taskstate.Calendar: dates, weekdays, daily and dated windows,
// cron-matched minutes, and the calendars it includes) is kept in the task
// state beside the stored schedules ([Scheduler.CreateCalendar]), read
// with them, and changed from an instant every node agrees on, as they
// are. A task that names calendars ([Calendar]) has each fire judged, when
// it is due, by the rules in force at its instant, on the wall clock of
// the task's zone: an excluded fire runs on no node, and is recorded once
// with [OutcomeExcluded] and the calendar's name, which the audit counts
// apart from misses. [StartAt] and [EndAt] bound a task's instants, an @at
// expression fires once, and [MaxRuns] makes a task run N times in the
// cluster, each run taking one in the task state (taskstate.Store.TakeRun)
// under its lease; past them a task is completed ([TaskInfo].Completed).
// [Scheduler.NextFires] previews the instants to come with what each of
// these does to them; [PauseAfterFailures] pauses a task after failures in
// a row, with a note ([Scheduler.Pause] takes one too: [WithNote], [By]).
//
// # History and audit
//
// Every run is recorded in the store, and so is every fire that did not
// run for a reason an operator must see: paused (by the node that claimed
// it), a lock or store failure (by each node that had one), reached too
// late. [Scheduler.History] and [Scheduler.ClusterTasks] thus answer for
// the whole cluster. A fire that another holder of its lock, another
// node's claim, a run still going or another node's ownership kept from
// running costs no record: the record of what ran stands for it, and
// [Scheduler.Audit] derives it. A node records the fires that end together
// in one call; records that the store refuses (it is down) wait, up to
// 10,000, for the next call that gets through, so that the fires that
// failed during an outage appear in the history once it is over.
//
// [Scheduler.Audit] compares the instants a task's schedule produced over
// the history's span with what the nodes recorded, and names each instant
// ran, skipped, failed, missed or pending ([FireStatus]): a missed instant
// is one that no node recorded and no recorded run held the lock over,
// older than the time its run could still be going.
//
// # Health
//
// [Scheduler.Health] derives each task's state from the same history,
// its pause flag and the run of it in flight on this node: ok, late (its
// newest fire did not start within its grace, [LateAfter]), failing (its
// newest fires that ran failed, [FailingAfter]), overrun (a run went past
// its [RunBudget]), down (no run started for [DownAfter] after a fire was
// due), paused or completed; with since when and why. It costs two reads
// of the store per task (the flag and the history), which
// [Scheduler.ClusterTasks] makes anyway ([TaskInfo].Health).
//
// # Stopping
//
// [Scheduler.Stop] stops new fires at once, ends lock waits, and waits for
// the runs in flight until a quarter of its context's time (at most 2s) is
// left; it logs at Info what it waits for. Then it cancels the runs still
// going (logged at Warn as cancelled, not failed), releases their leases,
// logs at Error which runs it cut, and returns that error, before its
// context ends: an fx application's stop timeout leaves no lease held.
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
// Info ("lock 'x' is held", "fire already claimed by another node",
// "previous run still going", "previous fire still waiting for its lock");
// a fire reached too late to claim, a renewal to be retried, a lease lost
// under a run and a run cancelled by Stop at Warn; lock failures, task
// errors, panics, a renewal that found the lease lost and the runs Stop cut
// at Error; the acquisition (with its token), lock waits, and each run's
// start and end (with its duration and token) at Debug. The run lines are
// written when the logger takes debug records at [New], so that runs nobody
// observes pay nothing. Log lines carry task names, lock keys, fire
// instants, tokens and errors, never a driver's connection settings.
package scheduling
