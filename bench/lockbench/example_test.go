package lockbench_test

import (
	"os"
	"time"

	"github.com/ndigo/ndigo/bench/lockbench"
)

// Two runs of two contenders: each figure is the median over runs, and the
// ratio is taken within each run first (2.0 and 1.5, median 2.0).
func ExampleTable() {
	var r lockbench.Results
	sc := lockbench.Scenario(16, false)
	r.Add(sc, "ours", lockbench.Cell{PerSec: 2000, P50: time.Millisecond, P99: 3 * time.Millisecond, Metrics: []float64{2}})
	r.Add(sc, "peer", lockbench.Cell{PerSec: 1000, P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, Metrics: []float64{3}})
	r.Add(sc, "ours", lockbench.Cell{PerSec: 1800, P50: time.Millisecond, P99: 4 * time.Millisecond, Metrics: []float64{2}})
	r.Add(sc, "peer", lockbench.Cell{PerSec: 1200, P50: 2 * time.Millisecond, P99: 6 * time.Millisecond, Metrics: []float64{3}})
	lockbench.Table{
		Ours:    "ours",
		Names:   []string{"ours", "peer"},
		Metrics: []lockbench.Metric{{Header: "round trips/acq", Format: "%.2f"}},
	}.Write(os.Stdout, &r)
	// Output:
	// ### distinct keys, 16 goroutines
	//
	// | contender | cycles/s | p50 | p99 | round trips/acq | owner changes | owner changes/s | ours ÷ this |
	// |---|---:|---:|---:|---:|---:|---:|---:|
	// | ours | 2000 | 1ms | 4ms | 2.00 | — | — | — |
	// | peer | 1200 | 2ms | 6ms | 3.00 | — | — | 2.00× |
}
