package chaos

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// A run longer than the application's stop timeout, then SIGINT: the
// scheduler stops waiting for the run before fx gives up on its stop hooks,
// cancels the run, releases its lease, says so in the log, and the process
// exits with the lock key gone from Redis: the next node need not wait out
// the 30s TTL. Three tries, since the race it guards against was lost only
// some of the time.
func TestSlowStopReleasesLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	lockKey := "ndigo:{" + nodeNS + ":" + nodeLock + "}:lock"
	for try := range 3 {
		p := nodetest.New(t)
		name := "slow" + string(rune('0'+try))
		startNode(p, name, srv.Addr(), "CHAOS_TTL=30s", "CHAOS_WORK=40s", "CHAOS_STOP_TIMEOUT=2s")
		run, _ := p.WaitLine("a run starting", 0, 30*time.Second, isRun("run start"))
		if n, err := rdb.Exists(context.Background(), lockKey).Result(); err != nil || n != 1 {
			t.Fatalf("lock key during the run: %d, %v", n, err)
		}
		p.Signal(run.Proc, syscall.SIGINT)
		exitErr := p.WaitExit(run.Proc, 10*time.Second)
		if n, err := rdb.Exists(context.Background(), lockKey).Result(); err != nil || n != 0 {
			t.Fatalf("try %d: lock key still held after the process exited (%v): %d, %v", try, exitErr, n, err)
		}
		var stopping, cut bool
		for _, l := range p.All() {
			switch {
			case l.Msg == "stopping: waiting for runs in flight" && l.Level == "INFO":
				stopping = true
			case strings.HasPrefix(l.Msg, "stop deadline") && l.Level == "ERROR" && strings.Contains(l.Err, "Job"):
				cut = true
			case l.Msg == "task failed":
				t.Errorf("the run cut by stop was logged as a failure: %+v", l)
			}
		}
		if !stopping || !cut {
			t.Errorf("try %d: logged the wait at stop %v, the cut runs %v", try, stopping, cut)
		}
		if exitErr == nil {
			t.Errorf("try %d: exit 0 although stop cut a run", try)
		}
	}
}
