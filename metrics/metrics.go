package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndigo/ndigo/scheduling"
)

// Metric names, as exposed to Prometheus.
const (
	LockAttempts        = "ndigo_lock_attempts_total"                 // counter; outcome: acquired, held, error
	LockAcquireDuration = "ndigo_lock_acquire_duration_seconds"       // histogram of Acquire calls
	LeasesLost          = "ndigo_leases_lost_total"                   // counter; task
	LeaseRenewalsFailed = "ndigo_lease_renewals_failed_total"         // counter; task
	TaskFires           = "ndigo_task_fires_total"                    // counter; task
	TaskLastSuccess     = "ndigo_task_last_success_timestamp_seconds" // gauge; task: when the last run that returned nil ended
	TaskRuns            = "ndigo_task_runs_total"                     // counter; task, outcome: ok, error, panic, cancelled (by stop, or superseded by a later fire)
	TaskSkips           = "ndigo_task_skips_total"                    // counter; task, reason
	TaskRetries         = "ndigo_task_retries_total"                  // counter; task: retry attempts run (scheduling.Retry), whatever they returned
	TaskBackfillRuns    = "ndigo_task_backfill_runs_total"            // counter; task: runs of backfill instants (Scheduler.Backfill), whatever they returned
	TaskRunDuration     = "ndigo_task_run_duration_seconds"           // histogram; task
	TaskLateness        = "ndigo_task_lateness_seconds"               // histogram; task: run start minus scheduled instant
)

// Values of the reason label of [TaskSkips].
const (
	ReasonLockHeld     = "lock_held"     // another holder had the lock
	ReasonStillRunning = "still_running" // the previous run on this node was still going
	ReasonLockPending  = "lock_pending"  // the previous fire on this node was still in its lock step (a driver call not answered, a lock wait)
	ReasonAlreadyRun   = "already_run"   // another node claimed the fire
	ReasonMissed       = "missed"        // the node reached the fire too late to claim it
	ReasonPaused       = "paused"        // the task is paused cluster-wide
	ReasonNotOwner     = "not_owner"     // another node owns the task (scheduling.Config.Spread)
	ReasonRetrying     = "retrying"      // a retry of an earlier fire of the task was pending (scheduling.Retry)
	ReasonBuffered     = "buffered"      // the fire waits for the run going, and runs once it ends (scheduling.Overlap buffer-one, cancel-previous)
	ReasonOneWaiting   = "one_waiting"   // another fire already waited for the run going (scheduling.Overlap buffer-one)
	ReasonNoDriver     = "no_driver"     // a locked task on a scheduler without a driver
	ReasonLockError    = "lock_error"    // the driver failed
)

// Metrics holds ndigo's Prometheus collectors. It is a
// [scheduling.Listener], which counts fires, runs and skips, and
// [Metrics.InstrumentDriver] wraps a lock driver to count lock attempts. It
// is safe for concurrent use.
type Metrics struct {
	scheduling.NopListener

	attempts       [3]prometheus.Counter // by attemptOutcome
	acquire        prometheus.Histogram
	leasesLost     *prometheus.CounterVec
	renewalsFailed *prometheus.CounterVec
	fires          *prometheus.CounterVec
	runs           *prometheus.CounterVec
	skips          *prometheus.CounterVec
	retries        *prometheus.CounterVec
	backfills      *prometheus.CounterVec
	lastSuccess    *prometheus.GaugeVec
	runDuration    *prometheus.HistogramVec
	lateness       *prometheus.HistogramVec

	tasks sync.Map // task name -> *taskMetrics, so that runs skip the label lookups
}

type attemptOutcome int

const (
	acquired attemptOutcome = iota
	held
	failed
)

var attemptLabels = [3]string{acquired: "acquired", held: "held", failed: "error"}

// taskMetrics are one task's resolved children of the labelled vectors.
type taskMetrics struct {
	fires                            prometheus.Counter
	retries                          prometheus.Counter
	backfills                        prometheus.Counter
	ok, errored, panicked, cancelled prometheus.Counter
	runDuration, lateness            prometheus.Observer
}

// New registers ndigo's collectors with reg and returns them. A nil reg
// means prometheus.DefaultRegisterer. Collectors already registered with
// reg by an earlier New (another application in the same process) are
// shared, not an error.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m := &Metrics{}
	attempts, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: LockAttempts,
		Help: "Lock acquisition attempts by outcome: acquired, held (another holder has it), error (the driver failed).",
	}, []string{"outcome"}))
	if err != nil {
		return nil, err
	}
	for i, l := range attemptLabels {
		m.attempts[i] = attempts.WithLabelValues(l)
	}
	if m.acquire, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    LockAcquireDuration,
		Help:    "Duration of lock acquisition attempts, whatever their outcome.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})); err != nil {
		return nil, err
	}
	counter := func(name, help string, labels ...string) (*prometheus.CounterVec, error) {
		return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
	}
	if m.leasesLost, err = counter(LeasesLost, "Runs whose lease ended before the task returned.", "task"); err != nil {
		return nil, err
	}
	if m.renewalsFailed, err = counter(LeaseRenewalsFailed, "Runs whose lease renewal failed.", "task"); err != nil {
		return nil, err
	}
	if m.lastSuccess, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: TaskLastSuccess,
		Help: "When the task's last run that returned nil ended, in Unix seconds; absent until one did."}, []string{"task"})); err != nil {
		return nil, err
	}
	if m.fires, err = counter(TaskFires, "Fires of a task on this node, run or skipped.", "task"); err != nil {
		return nil, err
	}
	if m.runs, err = counter(TaskRuns, "Runs of a task by outcome: ok, error, panic, cancelled (by stop at its deadline, or superseded by a later fire).", "task", "outcome"); err != nil {
		return nil, err
	}
	if m.skips, err = counter(TaskSkips, "Fires skipped on this node by reason: "+
		"lock_held, still_running, lock_pending, already_run, missed, paused, not_owner, retrying, buffered, one_waiting, no_driver, lock_error.", "task", "reason"); err != nil {
		return nil, err
	}
	if m.retries, err = counter(TaskRetries, "Retries of a failed run that ran on this node (attempt 2 or later of a fire), whatever they returned.", "task"); err != nil {
		return nil, err
	}
	if m.backfills, err = counter(TaskBackfillRuns, "Runs of backfill instants on this node (scheduling.Scheduler.Backfill), whatever they returned; not in the lateness histogram.", "task"); err != nil {
		return nil, err
	}
	if m.runDuration, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    TaskRunDuration,
		Help:    "Duration of task runs.",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
	}, []string{"task"})); err != nil {
		return nil, err
	}
	if m.lateness, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    TaskLateness,
		Help:    "Run start minus the scheduled instant.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
	}, []string{"task"})); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c with reg, or returns the equal collector reg already
// has.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("metrics: register: %w", err)
	}
	return c, nil
}

func (m *Metrics) task(name string) *taskMetrics {
	if t, ok := m.tasks.Load(name); ok {
		return t.(*taskMetrics)
	}
	t := &taskMetrics{
		fires:       m.fires.WithLabelValues(name),
		retries:     m.retries.WithLabelValues(name),
		backfills:   m.backfills.WithLabelValues(name),
		ok:          m.runs.WithLabelValues(name, string(scheduling.OutcomeOK)),
		errored:     m.runs.WithLabelValues(name, string(scheduling.OutcomeError)),
		panicked:    m.runs.WithLabelValues(name, string(scheduling.OutcomePanic)),
		cancelled:   m.runs.WithLabelValues(name, string(scheduling.OutcomeCancelled)),
		runDuration: m.runDuration.WithLabelValues(name),
		lateness:    m.lateness.WithLabelValues(name),
	}
	actual, _ := m.tasks.LoadOrStore(name, t)
	return actual.(*taskMetrics)
}

// Init creates every counter and histogram of the named tasks at zero,
// for each outcome and skip reason, retries included, so that a scrape
// before their first fire tells zero from missing. Module calls it for
// every task of its scheduler when the application is built.
func (m *Metrics) Init(tasks ...string) {
	for _, name := range tasks {
		m.task(name)
		for _, o := range []scheduling.Outcome{scheduling.OutcomeOK, scheduling.OutcomeError,
			scheduling.OutcomePanic, scheduling.OutcomeCancelled} {
			m.runs.WithLabelValues(name, string(o))
		}
		for _, r := range []string{ReasonLockHeld, ReasonStillRunning, ReasonAlreadyRun, ReasonMissed,
			ReasonPaused, ReasonNotOwner, ReasonRetrying, ReasonBuffered, ReasonOneWaiting, ReasonNoDriver, ReasonLockError} {
			m.skips.WithLabelValues(name, r)
		}
		m.leasesLost.WithLabelValues(name)
		m.renewalsFailed.WithLabelValues(name)
	}
}

// AfterRun counts the fire and the run by outcome, and a retry (a run of
// attempt 2 or later), observes the run's lateness and duration, and
// counts a lost lease and a failed renewal.
// Everything is recorded here rather than in BeforeRun, which is on the path
// to the task's start.
func (m *Metrics) AfterRun(_ context.Context, e scheduling.Event) {
	t := m.task(e.Task)
	t.fires.Inc()
	switch {
	case e.Backfill: // its instant is past on purpose: it is not late
		t.backfills.Inc()
	case e.Attempt > 1:
		t.retries.Inc()
		t.lateness.Observe(e.Lateness.Seconds())
	default:
		t.lateness.Observe(e.Lateness.Seconds())
	}
	switch e.Outcome {
	case scheduling.OutcomeOK:
		t.ok.Inc()
		m.lastSuccess.WithLabelValues(e.Task).Set(float64(e.Start.Add(e.Duration).UnixNano()) / 1e9)
	case scheduling.OutcomePanic:
		t.panicked.Inc()
	case scheduling.OutcomeCancelled:
		t.cancelled.Inc()
	default:
		t.errored.Inc()
	}
	t.runDuration.Observe(e.Duration.Seconds())
	if e.LeaseLost {
		m.leasesLost.WithLabelValues(e.Task).Inc()
	}
	if e.RenewErr != nil {
		m.renewalsFailed.WithLabelValues(e.Task).Inc()
	}
}

// Skipped counts the fire and the skip by reason. A buffered fire
// (scheduling.OutcomeBuffered) is counted here when it starts to wait,
// and its run, when the run going ended, in AfterRun as any run.
func (m *Metrics) Skipped(e scheduling.Event) {
	m.task(e.Task).fires.Inc()
	m.skips.WithLabelValues(e.Task, skipReason(e)).Inc()
}

func skipReason(e scheduling.Event) string {
	switch e.Outcome {
	case scheduling.OutcomeLockHeld:
		return ReasonLockHeld
	case scheduling.OutcomeRunning:
		return ReasonStillRunning
	case scheduling.OutcomeLockPending:
		return ReasonLockPending
	case scheduling.OutcomeAlreadyRun:
		return ReasonAlreadyRun
	case scheduling.OutcomeMissed:
		return ReasonMissed
	case scheduling.OutcomePaused:
		return ReasonPaused
	case scheduling.OutcomeNotOwner:
		return ReasonNotOwner
	case scheduling.OutcomeRetrying:
		return ReasonRetrying
	case scheduling.OutcomeBuffered:
		return ReasonBuffered
	case scheduling.OutcomeBufferFull:
		return ReasonOneWaiting
	}
	if errors.Is(e.Err, scheduling.ErrNoDriver) {
		return ReasonNoDriver
	}
	return ReasonLockError
}
