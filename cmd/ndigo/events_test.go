package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// events lists the trail: each control command is kept once, by the
// token's holder and the CLI's user, under the Idempotency-Key the CLI
// sent; bad flags are refused before any request.
func TestEventsListsTheTrail(t *testing.T) {
	n := startScheduleNode(t, testToken)
	env := map[string]string{"USER": "ops"}
	for k, v := range n.env {
		env[k] = v
	}
	if res := ndigo(t, env, "pause", "nightly", "--note", "ledger migration"); res.code != 0 {
		t.Fatalf("pause: exit %d: %s", res.code, res.stderr)
	}
	if res := ndigo(t, env, "run", "nightly"); res.code != 0 {
		t.Fatalf("run: exit %d: %s", res.code, res.stderr)
	}
	res := ndigo(t, env, "events")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ") ||
		!strings.Contains(lines[1], "admin: ndigo CLI (ops)") || !strings.Contains(lines[1], "pause") || !strings.Contains(lines[1], "ledger migration") ||
		!strings.Contains(lines[2], "run") || !strings.HasPrefix(lines[3], "the next events: ndigo events --after ") {
		t.Fatalf("events: exit %d, stdout:\n%s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	res = ndigo(t, env, "--json", "events", "--after", "1", "-n", "5")
	var body struct {
		Events []struct {
			Seq         int64
			Key, Action string
		}
		Last int64
	}
	if err := json.Unmarshal([]byte(res.stdout), &body); err != nil || res.code != 0 || len(body.Events) != 1 || body.Events[0].Action != "run" ||
		!strings.HasPrefix(body.Events[0].Key, "ndigo-cli-") || body.Last != body.Events[0].Seq {
		t.Fatalf("--json events --after 1 -n 5: exit %d, %v, stdout %s", res.code, err, res.stdout)
	}
	for _, args := range [][]string{{"events", "-n", "0"}, {"events", "--after", "-2"}} {
		if res := ndigo(t, env, args...); res.code != exitUsage || !strings.Contains(res.stderr, "events: ") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming the flag", args, res.code, res.stderr)
		}
	}
}
