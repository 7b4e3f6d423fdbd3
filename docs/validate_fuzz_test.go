package docs

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

// FuzzValidate feeds task specs, as builder options or struct tags give
// them, to scheduling.Validate: it never panics; a rejection is a
// *ValidationError wrapping ErrInvalidSpec whose problems each name the
// option and the rule; and a scheduler with a lock driver accepts every spec
// Validate accepts and gives it a next fire.
func FuzzValidate(f *testing.F) {
	for _, seed := range []struct {
		cron, lock         string
		hasLock            bool
		ttl, wait, runTime int64 // ms; 0 leaves the option out
		renew              bool
	}{
		{"0 2 * * *", "payroll-window", true, 60000, 0, 0, false},
		{"*/5 * * * * *", "k", true, 1000, 500, 2000, true},
		{"@every 1m30s", "", false, 0, 0, 0, false},
		{"CRON_TZ=Europe/Paris 30 2 * * *", "k", true, -1, -1, -1, false},
		{"61 * * * *", "", true, 1, 0, 0, true},
		{"0 0 30 2 *", "k", false, 5000, 0, 0, false},
		{"@every 0s", "k", true, 0, 0, 90000, false},
		{"TZ=Nowhere 0 9 * * MON-FRI", "k", true, 0, 0, 0, false},
		{"0 0 29 2 *", "k", true, 1, 1, 1, false},
		{"", "", false, 0, 0, 0, true},
	} {
		f.Add(seed.cron, seed.lock, seed.hasLock, seed.ttl, seed.wait, seed.runTime, seed.renew)
	}
	f.Fuzz(func(t *testing.T, cron, lock string, hasLock bool, ttl, wait, runTime int64, renew bool) {
		ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
		opts := []scheduling.Option{scheduling.Cron(cron)}
		if hasLock {
			opts = append(opts, scheduling.Lock(lock))
		}
		if ttl != 0 {
			opts = append(opts, scheduling.LockTTL(ms(ttl)))
		}
		if wait != 0 {
			opts = append(opts, scheduling.LockWait(ms(wait)))
		}
		if runTime != 0 {
			opts = append(opts, scheduling.MaxRunTime(ms(runTime)))
		}
		if renew {
			opts = append(opts, scheduling.Renew())
		}
		task := scheduling.NewTask((&Payroll{}).Close, opts...)
		err := scheduling.Validate(task)
		if err != nil {
			var ve *scheduling.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, scheduling.ErrInvalidSpec) || len(ve.Problems) == 0 {
				t.Fatalf("Validate = %v; want a *ValidationError wrapping ErrInvalidSpec", err)
			}
			for _, p := range ve.Problems {
				if p.Option == "" || p.Rule == "" {
					t.Fatalf("problem without option or rule: %+v", p)
				}
			}
			return
		}
		s := scheduling.New(scheduling.Config{Driver: locks.NewInProcessDriver(), Logger: slog.New(slog.DiscardHandler)})
		defer func() { _ = s.Stop(context.Background()) }()
		if err := s.Add(task); err != nil {
			t.Fatalf("Validate accepted %q, Add rejects it: %v", cron, err)
		}
		if next := s.Tasks()[0].Next; next.IsZero() {
			t.Fatalf("Validate accepted %q, which has no next fire", cron)
		}
	})
}
