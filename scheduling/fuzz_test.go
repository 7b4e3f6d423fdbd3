package scheduling

import (
	"testing"
	"time"
)

func FuzzParseSchedule(f *testing.F) {
	for _, seed := range []string{"0 2 * * *", "*/5 * * * * *", "@every 1m30s", "@hourly", "CRON_TZ=Europe/Paris 30 2 * * *",
		"TZ=America/New_York 0 9 * * MON-FRI", "61 * * * *", "0 0 30 2 *", "@every", "5-1 * * * *", "*/0 * * * *", "TZ="} {
		f.Add(seed)
	}
	from := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := parseSchedule(expr, time.UTC)
		if err != nil {
			return
		}
		// A schedule that parses fires after any instant, strictly later.
		prev := from
		for range 3 {
			next := s.Next(prev)
			if next.IsZero() {
				return
			}
			if !next.After(prev) {
				t.Fatalf("%q: Next(%v) = %v, not after it", expr, prev, next)
			}
			prev = next
		}
	})
}
