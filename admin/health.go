package admin

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// DefaultCheckTimeout bounds each health check when [Options.CheckTimeout]
// is zero.
const DefaultCheckTimeout = 2 * time.Second

// A Check probes one dependency for /healthz.
type Check struct {
	// Name names the dependency in the response, e.g. "disk"; it must
	// be unique among a Handler's checks.
	Name string
	// Check returns nil if the dependency works. Its error message is
	// shown in the response, so it must not carry secrets.
	Check func(context.Context) error
}

// The names of the checks that [BackendChecks] returns, in /healthz's
// "checks".
const (
	LocksCheck     = "locks"
	TaskStateCheck = "taskstate"
)

// BackendChecks returns the /healthz checks of the backends a scheduler
// depends on: [LocksCheck] when driver (or a driver it wraps, see
// locks.As) implements locks.HealthChecker, and [TaskStateCheck] when store
// does. The Redis, PostgreSQL and etcd drivers and stores do; the in-process
// ones, which cannot be down while the process runs, do not, and get no
// check. Either argument may be nil.
//
// [Module] adds them for the graph's locks.Driver and taskstate.Store (the
// ones the scheduler is built from); pass them in [Options].Checks when
// you build a Handler yourself.
func BackendChecks(driver locks.Driver, store taskstate.Store) []Check {
	var checks []Check
	if hc, ok := locks.As[locks.HealthChecker](driver); ok {
		checks = append(checks, Check{Name: LocksCheck, Check: hc.CheckHealth})
	}
	if hc, ok := store.(locks.HealthChecker); ok {
		checks = append(checks, Check{Name: TaskStateCheck, Check: hc.CheckHealth})
	}
	return checks
}

// HealthJSON is the body of GET /healthz.
type HealthJSON struct {
	Status string            `json:"status"` // "ok" or "unavailable"
	Driver string            `json:"driver"` // the scheduler's lock driver, e.g. "redislocks (namespace prod)"
	Checks map[string]string `json:"checks"` // "ok" or the error, by check name
}

// health runs the checks at once, so that /healthz answers within one
// CheckTimeout however many backends are slow to fail.
func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	res := HealthJSON{Status: "ok", Driver: h.s.DriverName(), Checks: map[string]string{}}
	errs := make([]error, len(h.checks))
	var wg sync.WaitGroup
	for i, c := range h.checks {
		wg.Go(func() { errs[i] = h.probe(r.Context(), c) })
	}
	wg.Wait()
	for i, c := range h.checks {
		if errs[i] != nil {
			res.Status = "unavailable"
			res.Checks[c.Name] = errs[i].Error()
			continue
		}
		res.Checks[c.Name] = "ok"
	}
	code := http.StatusOK
	if res.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, res)
}

// probe runs one check within the timeout; a panicking check fails.
func (h *Handler) probe(ctx context.Context, c Check) (err error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check panicked: %v", p)
		}
	}()
	return c.Check(ctx)
}
