package main

import (
	"context"
	"net/http/httptest"
	"os"
	"time"

	"github.com/ndigo/ndigo/internal/admintest"
)

// ndigo tasks, then ndigo pause, against a node (here the test fixture of
// the admin contract) whose admin token is in NDIGO_ADMIN_TOKEN.
func Example() {
	at := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	cluster := admintest.NewCluster("s3cret", admintest.Task{Name: "Payroll.Close", Cron: "0 2 * * *", Lock: "payroll-window",
		Next: at.AddDate(0, 0, 1), Runs: []admintest.Run{{Fire: at, Node: "b", Token: 42, Start: at, Duration: time.Second, Outcome: "ok"}}})
	srv := httptest.NewServer(cluster.Node("a"))
	defer srv.Close()
	env := map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": "s3cret"}

	run(context.Background(), []string{"tasks"}, func(k string) string { return env[k] }, os.Stdout, os.Stderr)
	run(context.Background(), []string{"pause", "Payroll.Close"}, func(k string) string { return env[k] }, os.Stdout, os.Stderr)
	// Output:
	// NAME           CRON       LOCK            NEXT                  PAUSED  HEALTH  LAST FIRE (CLUSTER)   OUTCOME  ATTEMPT  NODE  TOKEN  LAST FIRE HERE  RETRY DUE  FAILURES HERE  BACKFILL  HANDLER
	// Payroll.Close  0 2 * * *  payroll-window  2026-01-02T02:00:00Z  no      ok      2026-01-01T02:00:00Z  ok       -        b     42     -               -          0              -         -
	// "Payroll.Close" paused: every node skips its fires until it is resumed
}
