package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

// fireFormat is RFC 3339 with milliseconds: the same text on every node for
// the same fire.
const fireFormat = "2006-01-02T15:04:05.000Z07:00"

// PayrollController closes the books on a schedule. Its CloseBooks task is
// declared with struct tags; its schedule, lease and retries come from
// configuration (payroll.cron or --cron, payroll.lock-ttl, payroll.retry,
// payroll.retry-backoff, payroll.late-after, payroll.down-after). A run
// that fails (the ledger refused the write) is retried as the same fire,
// by another node if this one died.
type PayrollController struct {
	_ annotations.Scheduled `method:"CloseBooks" cron:"${payroll.cron}" lock:"payroll-window" lockTtl:"${payroll.lock-ttl}" catchUp:"${payroll.catch-up}" retry:"${payroll.retry}" retryBackoff:"${payroll.retry-backoff}" lateAfter:"${payroll.late-after}" downAfter:"${payroll.down-after}"`

	ledger ledger
	log    *slog.Logger
}

// NewPayrollController returns a controller that records to l and logs to log.
func NewPayrollController(l ledger, log *slog.Logger) *PayrollController {
	return &PayrollController{ledger: l, log: log}
}

// CloseBooks records one closed payroll in the fenced ledger and logs it.
// It runs only while this node holds the payroll-window lease; attempt is
// 1 for a fire's first run, 2 and more for its retries.
func (c *PayrollController) CloseBooks(ctx context.Context) error {
	run, _ := scheduling.RunFromContext(ctx)
	lease, ok := locks.FromContext(ctx)
	if !ok {
		return fmt.Errorf("payroll: CloseBooks ran without a lease")
	}
	if err := c.ledger.Append(ctx, lease, run.Fire, run.Node); err != nil {
		return err
	}
	c.log.Info("payroll closed", "fire", run.Fire.UTC().Format(fireFormat), "node", run.Node, "token", lease.Token(), "manual", run.Manual,
		"attempt", run.Attempt)
	return nil
}

// reconcile is the builder-option form: a second task, checked on its own
// lock, that waits briefly for a busy lock instead of skipping at once.
func reconcile(log *slog.Logger, cfg Config) scheduling.Task {
	return scheduling.NewTask(func(ctx context.Context) error {
		run, _ := scheduling.RunFromContext(ctx)
		log.Info("accounts reconciled", "fire", run.Fire.UTC().Format(fireFormat), "node", run.Node)
		return nil
	},
		scheduling.Name("Reconcile"),
		scheduling.Cron("@every 5s"),
		scheduling.Lock("reconcile"),
		scheduling.LockWait(time.Second),
		scheduling.LockTTL(10*time.Second),
		scheduling.LateAfter(cfg.Payroll.LateAfter),
		scheduling.DownAfter(cfg.Payroll.DownAfter),
	)
}

// registerTenantReports registers the handler that stored schedules name,
// as in `ndigo schedule create report-acme --handler tenant-report --cron
// "0 2 * * *" --lock report:acme --args '{"tenant": "acme"}'`: a report per
// tenant, whose schedules operators create, change and delete while the
// cluster runs. A handler without dependencies registers with
// scheduling.Handler; this one logs through the application's logger, so it
// registers from an fx.Invoke, before Start.
func registerTenantReports(s *scheduling.Scheduler, log *slog.Logger) error {
	return s.Handle("tenant-report", func(ctx context.Context, args json.RawMessage) error {
		var a struct {
			Tenant string `json:"tenant"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Tenant == "" {
			return fmt.Errorf("payroll: tenant-report needs the args {\"tenant\": NAME}, got %s", args)
		}
		run, _ := scheduling.RunFromContext(ctx)
		log.Info("tenant report sent", "tenant", a.Tenant, "task", run.Task, "fire", run.Fire.UTC().Format(fireFormat), "node", run.Node)
		return nil
	})
}
