package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/ping"
	"github.com/ndigo/ndigo/taskstate"
)

// checkedDriver is a driver whose health check fails while down is set.
type checkedDriver struct {
	locks.Driver
	down atomic.Bool
}

func (d *checkedDriver) CheckHealth(context.Context) error {
	if d.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

// panickingStore is a store whose health check panics.
type panickingStore struct{ taskstate.Store }

func (panickingStore) CheckHealth(context.Context) error { panic("bug") }

// The backend collector reports a driver's check as it goes, through the
// driver's wrappers; an in-process store, which has no check, as up; and a
// check that panics as down.
func TestBackendCollector(t *testing.T) {
	d := &checkedDriver{Driver: locks.NewInProcessDriver()}
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	store, _ := taskstate.NewInProcess(taskstate.MaxHistory)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBackendCollector(m.InstrumentDriver(d), store))
	if l, s := sample(t, reg, BackendUp, "backend", BackendLocks), sample(t, reg, BackendUp, "backend", BackendTaskState); l != 1 || s != 1 {
		t.Errorf("up: locks %v, taskstate %v; want 1 and 1", l, s)
	}
	d.down.Store(true)
	if l := sample(t, reg, BackendUp, "backend", BackendLocks); l != 0 {
		t.Errorf("driver down: locks %v, want 0", l)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	reg = prometheus.NewRegistry()
	reg.MustRegister(NewBackendCollector(nil, panickingStore{store}))
	if s := sample(t, reg, BackendUp, "backend", BackendTaskState); s != 0 {
		t.Errorf("a panicking check: taskstate %v, want 0", s)
	}
	if n := testutil.CollectAndCount(NewBackendCollector(nil, nil)); n != 0 {
		t.Errorf("no backends: %d series", n)
	}
}

// The ping collector serves a Pinger's counts, and its last success once
// there is one.
func TestPingCollector(t *testing.T) {
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	fc := clockwork.NewFakeClockAt(epoch)
	p, err := ping.New(ping.Config{URL: srv.URL + "/secret", Every: time.Minute, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop(context.Background()) }()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewPingCollector(p))
	pings := func(n uint64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); p.Stats().Pings < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d pings, want %d", p.Stats().Pings, n)
			}
		}
	}
	pings(1)
	if n, f := sample(t, reg, Pings), sample(t, reg, PingFailures); n != 1 || f != 1 {
		t.Errorf("pings %v, failures %v; want 1 and 1", n, f)
	}
	if n := testutil.CollectAndCount(reg, PingLastSuccess); n != 0 {
		t.Errorf("%d last-success series before a success, want none", n)
	}
	fail.Store(false)
	fc.Advance(time.Minute)
	pings(2)
	if n, f, last := sample(t, reg, Pings), sample(t, reg, PingFailures), sample(t, reg, PingLastSuccess); n != 2 || f != 1 ||
		last != float64(epoch.Add(time.Minute).Unix()) {
		t.Errorf("pings %v, failures %v, last success %v; want 2, 1 and %v", n, f, last, epoch.Add(time.Minute).Unix())
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
