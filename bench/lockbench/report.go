package lockbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// HandoffScenario is the scenario under which Run records handoffs.
const HandoffScenario = "handoff"

// Results holds every cell of every run, by scenario and contender.
type Results struct {
	scenarios []string                     // in the order first measured
	cells     map[string]map[string][]Cell // scenario, contender: one cell per run
}

// Add records c as the next run's cell of contender name in scenario.
func (r *Results) Add(scenario, name string, c Cell) {
	if r.cells == nil {
		r.cells = map[string]map[string][]Cell{}
	}
	if r.cells[scenario] == nil {
		r.cells[scenario] = map[string][]Cell{}
		r.scenarios = append(r.scenarios, scenario)
	}
	r.cells[scenario][name] = append(r.cells[scenario][name], c)
}

// Cells returns contender name's cells in scenario, one per run.
func (r *Results) Cells(scenario, name string) []Cell { return r.cells[scenario][name] }

// A Metric is a column of a driver's own per-acquisition figures.
type Metric struct {
	Header string // the column's heading, such as "server µs/acq"
	Format string // the fmt verb of one value, such as "%.1f"
}

// A Table writes Results as Markdown: one table per cycle scenario, then
// the handoffs.
type Table struct {
	// Ours is the contender whose throughput is divided by each other's.
	Ours string
	// Names lists the contenders in row order.
	Names []string
	// Metrics heads Cell.Metrics, after the latencies.
	Metrics []Metric
	// Handoffs is the number of handoffs per contender and run.
	Handoffs int
}

// Write writes every scenario of r. Each figure is the median over runs;
// each ratio is Ours' throughput over the row's, computed within each run,
// then the median, or a dash when Ours was not measured.
func (t Table) Write(w io.Writer, r *Results) {
	short, _, _ := strings.Cut(t.Ours, " ")
	for _, sc := range r.scenarios {
		if sc == HandoffScenario {
			continue
		}
		fmt.Fprintf(w, "### %s\n\n", sc)
		head, rule := "| contender | cycles/s | p50 | p99 |", "|---|---:|---:|---:|"
		for _, m := range t.Metrics {
			head += " " + m.Header + " |"
			rule += "---:|"
		}
		fmt.Fprintf(w, "%s owner changes | owner changes/s | %s ÷ this |\n", head, short)
		fmt.Fprintf(w, "%s---:|---:|---:|\n", rule)
		ours := r.cells[sc][t.Ours]
		for _, name := range t.Names {
			cs := r.cells[sc][name]
			if len(cs) == 0 {
				continue
			}
			ratio := "—"
			if name != t.Ours {
				var rs []float64
				for i, c := range cs {
					if i < len(ours) && c.PerSec > 0 {
						rs = append(rs, ours[i].PerSec/c.PerSec)
					}
				}
				if len(rs) > 0 {
					ratio = fmt.Sprintf("%.2f×", Median(rs))
				}
			}
			moves, movesPerSec := "—", "—"
			if strings.HasPrefix(sc, "one shared key") {
				moves = fmt.Sprintf("%.0f%%", 100*Median(field(cs, func(c Cell) float64 { return c.OwnerMoves })))
				movesPerSec = fmt.Sprintf("%.0f", Median(field(cs, func(c Cell) float64 { return c.OwnerMoves * c.PerSec })))
			}
			fmt.Fprintf(w, "| %s | %.0f | %v | %v |", name,
				Median(field(cs, func(c Cell) float64 { return c.PerSec })),
				Round(Median(field(cs, func(c Cell) time.Duration { return c.P50 }))),
				Round(Median(field(cs, func(c Cell) time.Duration { return c.P99 }))))
			for i, m := range t.Metrics {
				fmt.Fprintf(w, " "+m.Format+" |", Median(field(cs, func(c Cell) float64 {
					if i < len(c.Metrics) {
						return c.Metrics[i]
					}
					return 0
				})))
			}
			fmt.Fprintf(w, " %s | %s | %s |\n", moves, movesPerSec, ratio)
		}
		fmt.Fprintln(w)
	}
	if r.cells[HandoffScenario] == nil {
		return
	}
	fmt.Fprintf(w, "### Handoff: holder starts Release → waiter holds the lock (1 holder, 1 waiter, %d handoffs per run)\n\n", t.Handoffs)
	fmt.Fprintln(w, "| contender | p50 | p99 |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, name := range t.Names {
		cs, ok := r.cells[HandoffScenario][name]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %s | %v | %v |\n", name,
			Round(Median(field(cs, func(c Cell) time.Duration { return c.P50 }))),
			Round(Median(field(cs, func(c Cell) time.Duration { return c.P99 }))))
	}
}

// Median returns the middle value of xs (the upper one of an even count),
// or zero for none.
func Median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		var zero T
		return zero
	}
	return s[len(s)/2]
}

func field[T any](cs []Cell, f func(Cell) T) []T {
	out := make([]T, len(cs))
	for i, c := range cs {
		out[i] = f(c)
	}
	return out
}

// Round keeps three significant digits or so of d, for a table.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
