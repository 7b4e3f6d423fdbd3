package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/admintest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const testToken = "s3cret-token"

// fixtureTasks are the tasks of every test cluster: names with a dot, a
// space, a slash and a leading dash, a history with a manual run and an
// error that holds a tab and a newline.
func fixtureTasks() []admintest.Task {
	return []admintest.Task{
		{Name: "Payroll.Close", Cron: "@every 1s", Lock: "payroll-window", Next: epoch.Add(time.Second), Runs: []admintest.Run{
			{Fire: epoch, Node: "b", Token: 7, Start: epoch.Add(2*time.Millisecond + 345), Duration: 1500 * time.Millisecond, Outcome: "ok"},
			{Fire: epoch.Add(-time.Second), Manual: true, Node: "a", Token: 6, Start: epoch.Add(-time.Second), Duration: time.Millisecond,
				Outcome: "error", Error: "books\tdo not\nbalance"},
		}},
		{Name: "reports daily", Cron: "0 2 * * *"},
		{Name: "billing/export", Cron: "@hourly", Lock: "export", Paused: true},
		{Name: "-dash", Cron: "@daily"},
	}
}

// serve starts node "a" of a fixture cluster whose mutations need token
// ("" disables them).
func serve(t *testing.T, token string) (*admintest.Cluster, *httptest.Server) {
	t.Helper()
	c := admintest.NewCluster(token, fixtureTasks()...)
	srv := httptest.NewServer(c.Node("a"))
	t.Cleanup(srv.Close)
	return c, srv
}

// result is what one run of the command gave.
type result struct {
	code           int
	stdout, stderr string
}

// ndigo runs the command with args and the environment env.
func ndigo(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// fetch returns the body of method url, sent straight to the fixture.
func fetch(t *testing.T, method, url, token string) []byte {
	t.Helper()
	_, body := admintest.Send(t, method, url, token)
	return body
}
