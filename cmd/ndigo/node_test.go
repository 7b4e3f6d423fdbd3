package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
)

// The CLI against a real payroll process, over its admin address.
func TestTasksOnAPayrollNode(t *testing.T) {
	p := nodetest.New(t)
	p.Start("a", exec.Command(nodetest.BuildPayroll(t), "--node", "a", "--cron", "@every 1s", "--log-format", "json",
		"--for", "5m", "--admin-addr", "127.0.0.1:0"))
	serving, _ := p.WaitLine("the admin address", 0, time.Minute, func(l nodetest.Line) bool { return l.Msg == "admin endpoints serving" })
	env := map[string]string{"NDIGO_ADMIN": serving.Addr}

	res := ndigo(t, env, "tasks")
	if res.code != 0 {
		t.Fatalf("tasks: exit %d: %s", res.code, res.stderr)
	}
	rs := rows(t, res.stdout)
	closeBooks := row(t, rs, "PayrollController.CloseBooks")
	if got, want := closeBooks[:3], []string{"PayrollController.CloseBooks", "@every 1s", "payroll-window"}; !slices.Equal(got, want) {
		t.Errorf("name, cron, lock: %q, want %q", got, want)
	}
	if _, err := time.Parse(time.RFC3339, closeBooks[3]); err != nil {
		t.Errorf("next fire %q: %v", closeBooks[3], err)
	}
	// "unknown" until the node's handler serves the control API.
	if closeBooks[4] != "no" && closeBooks[4] != "unknown" {
		t.Errorf("paused: %q, want no", closeBooks[4])
	}
	if row(t, rs, "Reconcile")[1] != "@every 5s" {
		t.Errorf("Reconcile: %q", row(t, rs, "Reconcile"))
	}

	res = ndigo(t, env, "--json", "tasks")
	if res.code != 0 || !json.Valid([]byte(res.stdout)) {
		t.Errorf("--json tasks: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}
