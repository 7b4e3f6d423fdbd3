package metrics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/metrics"
)

// Without fx: build the collectors on a registry, wrap the driver, and pass
// the Metrics to scheduling.Config.Listeners.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		panic(err)
	}
	d := m.InstrumentDriver(locks.NewInProcessDriver())
	// scheduling.New(scheduling.Config{Driver: d, Listeners: []scheduling.Listener{m}})

	lease, _ := d.Acquire(context.Background(), "payroll-window", time.Minute)
	_, err = d.Acquire(context.Background(), "payroll-window", time.Minute)
	fmt.Println(err)
	_ = lease.Release(context.Background())

	n, _ := testutil.GatherAndCount(reg, metrics.LockAttempts)
	fmt.Println(n, "series of", metrics.LockAttempts)
	// Output:
	// locks: not acquired: key "payroll-window" is held
	// 3 series of ndigo_lock_attempts_total
}
