package main

import (
	"bytes"
	"flag"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// screenshots is where TestConsoleScreenshots writes its pictures: the
// test's temporary directory unless set (make screenshots sets ../../docs).
var screenshots = flag.String("screenshots", "", "write the console's screenshots into this directory")

// The console of a live 3-node payroll cluster on Redis, in a browser in
// New York, rendered after a few fires, a pause and a stalled Redis: the
// task list (local times, counts, the strip of the cluster's last fires)
// and CloseBooks's page (its audit and its recorded fires), as PNGs.
func TestConsoleScreenshots(t *testing.T) {
	srv := redistest.Start(t)
	p := nodetest.New(t)
	const token = "shots"
	base := map[string]string{}
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		p.StartPayroll(n, srv.Addr(), "shots", "3s", "--cron", "@every 1s", "--admin-addr", "127.0.0.1:0", "--admin-token", token)
		base[n] = adminURL(p, n)
	}
	task := base["node-a"]
	console := strings.TrimSuffix(task, "scheduledtasks/"+url.PathEscape(closeTask))
	p.WaitFires(closed, "", 4, 30*time.Second)
	// Two paused fires, and a Redis that stalls until a fire failed: the
	// strip shows paused and failed fires among the runs.
	var action map[string]any
	if code := call(t, http.MethodPost, task+"/pause", token, &action); code != http.StatusOK {
		t.Fatalf("pause: %d %v", code, action)
	}
	waitPausedFire(t, base, time.Now().Add(time.Second))
	if code := call(t, http.MethodPost, task+"/resume", token, &action); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, action)
	}
	p.WaitFires(closed, "", 8, 30*time.Second)
	var lists []string
	for _, u := range base {
		lists = append(lists, strings.TrimSuffix(u, "/"+url.PathEscape(closeTask)))
	}
	srv.Pause()
	waitFailure(t, lists, closeTask)
	srv.Resume()
	p.WaitFires(closed, "", 14, 60*time.Second)

	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	page := browsertest.OpenConsole(t, browsertest.NewInZone(t, "America/New_York"), console)
	page.WaitFor("the strips of the cluster's fires", `document.querySelectorAll("#tasks svg.strip rect.s-failed").length > 0 &&
		document.querySelectorAll("#tasks svg.strip rect.s-skipped").length > 0`)
	page.WaitFor("local times", `document.querySelector("#tasks time").textContent.match(/ E[SD]T$/) !== null`)
	shoot(t, page, filepath.Join(dir, "console-tasks.png"))
	page.Do("opening CloseBooks's page", browsertest.Navigate(console+"#task="+closeTask))
	page.WaitFor("the audit", `document.querySelectorAll("#audit-strip rect").length > 0 && document.querySelectorAll("#runs tbody tr").length > 0`)
	shoot(t, page, filepath.Join(dir, "console-task.png"))
}

func shoot(t *testing.T, page *browsertest.Console, path string) {
	t.Helper()
	png := page.Screenshot(1400)
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10_000 {
		t.Fatalf("%s: %d bytes, not a PNG of the page", path, len(png))
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// waitFailure waits until a node of lists (their GET /scheduledtasks)
// counts a failed fire of task.
func waitFailure(t *testing.T, lists []string, task string) {
	t.Helper()
	waitTask(t, lists, task, "a failed fire", func(tk listedTask) bool { return tk.Failures > 0 })
}
