package redislocks_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
)

// Each schedule call whose first reply was lost is resent by go-redis and
// answers what its first attempt did, having changed the schedules and
// moved their generation once; the schedules are the hash and the counter
// that the Store's documentation names, the hash holding EncodeSchedule's
// bytes.
func TestStoreScheduleCallsRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.proxy.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	behind, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "retry"})
	sc := taskstate.Schedule{Name: "Report.acme", Handler: "tenant-report", Cron: "0 2 * * *", Args: []byte(`{ "tenant": "acme" }`)}
	gen := func(want int64) {
		t.Helper()
		if n, err := s.direct.Get(ctx, "ndigo:{retry}:schedules:gen").Int64(); err != nil || n != want {
			t.Fatalf("ndigo:{retry}:schedules:gen = %d, %v; want %d: one move per call", n, err, want)
		}
	}
	stored := func(want taskstate.Schedule) {
		t.Helper()
		b, err := taskstate.EncodeSchedule(want)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := s.direct.HGet(ctx, "ndigo:{retry}:schedules", want.Name).Result(); err != nil || v != string(b) {
			t.Fatalf("ndigo:{retry}:schedules[%q] = %q, %v; want %q", want.Name, v, err, b)
		}
	}
	var sent, dropped int // the script's runs and the replies lost, so far
	lose := func(op string, call func() error) {
		t.Helper()
		m := s.dropFirstReply(redislocks.ScheduleSHA, "ndigo:{retry}:schedules")
		if err := call(); err != nil {
			t.Fatalf("%s whose first reply was lost: %v", op, err)
		}
		sent, dropped = sent+2, dropped+1
		if n, lost := s.proxy.Count(m), s.proxy.Dropped(); n != sent || lost != dropped {
			t.Fatalf("%s: the schedule script was sent %d times with %d replies dropped in all; want %d and %d", op, n, lost, sent, dropped)
		}
	}

	lose("CreateSchedule", func() error { return behind.CreateSchedule(ctx, sc) })
	stored(sc)
	gen(1)
	sc.Cron = "0 3 * * *"
	lose("UpdateSchedule", func() error { return behind.UpdateSchedule(ctx, sc) })
	stored(sc)
	gen(2)
	if err := behind.UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	sent++
	gen(2) // the same bytes: nothing changed
	lose("DeleteSchedule", func() error {
		if ok, err := behind.DeleteSchedule(ctx, sc.Name); err != nil || !ok {
			t.Fatalf("DeleteSchedule = %v, %v; want true", ok, err)
		}
		return nil
	})
	if n, err := s.direct.Exists(ctx, "ndigo:{retry}:schedules").Result(); err != nil || n != 0 {
		t.Fatalf("the schedules hash exists (%d, %v) after its one schedule was deleted", n, err)
	}
	gen(3)
	if p, err := behind.Poll(ctx); err != nil || p.Schedules != 3 {
		t.Fatalf("Poll = %+v, %v; want Schedules 3", p, err)
	}
}
