package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/metrics"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
)

func checkNames(cs []Check) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

// BackendChecks finds the driver's check through a wrapper (the metrics'
// instrumented driver), and the store's; the in-process ones have none.
func TestBackendChecks(t *testing.T) {
	c := redistest.Start(t).Client()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "backend-checks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	store, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "backend-checks"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	checks := BackendChecks(m.InstrumentDriver(d), store)
	if got, want := checkNames(checks), []string{LocksCheck, TaskStateCheck}; !slices.Equal(got, want) {
		t.Fatalf("checks %q, want %q", got, want)
	}
	for _, check := range checks {
		if err := check.Check(context.Background()); err != nil {
			t.Errorf("%s: %v", check.Name, err)
		}
	}
	inProcess, _ := taskstate.NewInProcess(0)
	if got := BackendChecks(locks.NewInProcessDriver(), inProcess); len(got) != 0 {
		t.Errorf("in-process checks %q, want none", checkNames(got))
	}
	if got := BackendChecks(nil, nil); len(got) != 0 {
		t.Errorf("checks without a driver or store: %q, want none", checkNames(got))
	}
}

// Two checks of one name would show as one in /healthz: New refuses them.
func TestNewRejectsRepeatedCheckNames(t *testing.T) {
	s, _ := newScheduler(t)
	ok := func(context.Context) error { return nil }
	_, err := New(Options{Scheduler: s, Checks: []Check{{Name: "locks", Check: ok}, {Name: "disk", Check: ok}, {Name: "locks", Check: ok}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `Checks[2] (name "locks"): the name of Checks[0] too`) {
		t.Fatalf("New with a repeated check name: %v", err)
	}
}

// The checks run at once: two that each wait for the other to start both
// pass, where one after the other the first would time out.
func TestHealthzRunsChecksAtOnce(t *testing.T) {
	s, _ := newScheduler(t)
	a, b := make(chan struct{}), make(chan struct{})
	meet := func(mine, theirs chan struct{}) func(context.Context) error {
		return func(ctx context.Context) error {
			close(mine)
			select {
			case <-theirs:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	h, err := New(Options{Scheduler: s, CheckTimeout: 2 * time.Second,
		Checks: []Check{{Name: "a", Check: meet(a, b)}, {Name: "b", Check: meet(b, a)}}})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, h, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %v; want both checks to meet", code, body)
	}
}
