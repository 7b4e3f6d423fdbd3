package metrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndigo/ndigo/scheduling"
)

// Metric names of the audit collector ([NewAuditCollector]).
const (
	// TaskMissedFires is a gauge by task: the instants of its schedule, over
	// the span of the shared history, that no node ran or skipped for a
	// reason (scheduling.FireMissed). Alert on it above zero.
	TaskMissedFires = "ndigo_task_missed_fires"
	// TaskLastMissedFire is a gauge by task: the newest missed instant, in
	// Unix seconds; absent while none is.
	TaskLastMissedFire = "ndigo_task_last_missed_fire_timestamp_seconds"
	// AuditUp is a gauge: 1 if the last audit of every task could read the
	// shared history, 0 if some could not (the store is down).
	AuditUp = "ndigo_audit_up"
	// TaskHealth is a gauge by task and state: 1 for the task's health
	// state (scheduling.Scheduler.Health), 0 for each other state of
	// scheduling.HealthStates, so that every state of every task is a
	// series. Alert on ndigo_task_health{state=~"late|down|failing|overrun"} == 1.
	// A task whose health could not be read is unknown.
	TaskHealth = "ndigo_task_health"
)

// auditBudget bounds the audits of one scrape, below Prometheus's default
// scrape timeout (10s).
const auditBudget = 5 * time.Second

// DefaultAuditEvery is how long an [AuditCollector] keeps a task's audit
// between scrapes when not told otherwise.
const DefaultAuditEvery = time.Minute

// An AuditCollector exposes, at each scrape, what scheduling's audit finds
// for each task of a scheduler ([scheduling.Scheduler.Audit]): the fires
// that ran nowhere, so that an alert fires when a schedule falls silent.
//
// It exposes each task's health too ([scheduling.Scheduler.Health]),
// derived with its audit: as of the task's last audit.
//
// Each audit reads the task's history from the store (and that of the tasks
// on its lock key), and its health the task's pause flag and history; a
// task is audited again at a scrape only once its last audit is older than
// the collector's interval, so that T tasks cost at most 3T reads per
// interval per node scraped, and nothing without scrapes.
type AuditCollector struct {
	s     *scheduling.Scheduler
	every time.Duration
	now   func() time.Time

	missed, last, up, health *prometheus.Desc

	mu    sync.Mutex
	cache map[string]audited
}

type audited struct {
	at     time.Time
	audit  scheduling.Audit
	health scheduling.Health
	failed bool
}

// NewAuditCollector returns a collector of s's audits, each kept for every
// (DefaultAuditEvery if zero or negative). Register it with a
// prometheus.Registerer; [Module] does.
func NewAuditCollector(s *scheduling.Scheduler, every time.Duration) *AuditCollector {
	if every <= 0 {
		every = DefaultAuditEvery
	}
	return &AuditCollector{s: s, every: every, now: time.Now, cache: map[string]audited{},
		missed: prometheus.NewDesc(TaskMissedFires,
			"Fires of the task's schedule, over the shared history's span, that no node ran or skipped for a reason (scheduling.Scheduler.Audit).",
			[]string{"task"}, nil),
		last: prometheus.NewDesc(TaskLastMissedFire,
			"The task's newest missed fire, in Unix seconds; absent while none is.", []string{"task"}, nil),
		up: prometheus.NewDesc(AuditUp,
			"1 if the last audit of every task could read the shared history, 0 if some could not.", nil, nil),
		health: prometheus.NewDesc(TaskHealth,
			"1 for the task's health state (scheduling.Scheduler.Health: ok, late, failing, overrun, down, paused, completed, unknown), 0 for the others.",
			[]string{"task", "state"}, nil),
	}
}

// Describe sends the collector's descriptions.
func (c *AuditCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.missed
	ch <- c.last
	ch <- c.up
	ch <- c.health
}

// Collect audits the tasks whose audit is older than the interval, and
// sends every task's figures.
func (c *AuditCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	up := 1.0
	// One deadline for the scrape's audits, and none after the first
	// failure: a store that is down must not hold /metrics past the
	// scraper's timeout. The tasks left keep their last figures.
	ctx, cancel := context.WithTimeout(context.Background(), auditBudget)
	defer cancel()
	down := false
	for _, t := range c.s.Tasks() {
		a, ok := c.cache[t.Name]
		if now := c.now(); !down && (!ok || now.Sub(a.at) >= c.every) {
			au, err := c.s.Audit(ctx, t.Name)
			down = err != nil
			if errors.Is(err, scheduling.ErrNoState) {
				return // no shared history: nothing to audit, nothing down
			}
			a = audited{at: now, audit: au, failed: err != nil, health: scheduling.HealthUnknown}
			if err != nil && ok {
				a.audit = c.cache[t.Name].audit // the last figures known
			}
			if err == nil {
				if h, err := c.s.Health(ctx, t.Name); err == nil {
					a.health = h.State
				} else {
					down, a.failed = true, true
				}
			}
			c.cache[t.Name] = a
		}
		if a.failed || down {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(c.missed, prometheus.GaugeValue, float64(a.audit.Missed), t.Name)
		for _, st := range scheduling.HealthStates {
			v := 0.0
			if st == a.health || (a.health == "" && st == scheduling.HealthUnknown) {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, v, t.Name, string(st))
		}
		if !a.audit.LastMissed.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue,
				float64(a.audit.LastMissed.UnixNano())/1e9, t.Name)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}
