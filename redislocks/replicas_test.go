package redislocks_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/redislocks"
)

func TestMinReplicasRejectsBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		opts redislocks.Options
		want []string // in the error
	}{
		{redislocks.Options{Client: c, Namespace: "p", MinReplicas: -1}, []string{"Options.MinReplicas", "-1", "must not be negative"}},
		{redislocks.Options{Client: c, Namespace: "p", MinReplicas: 1, MinReplicasTimeout: -time.Millisecond}, []string{"Options.MinReplicasTimeout", "-1ms", "must not be negative"}},
		{redislocks.Options{Client: c, Namespace: "p", MinReplicasTimeout: time.Second}, []string{"Options.MinReplicasTimeout", "1s", "Options.MinReplicas is 0"}},
		{redislocks.Options{Client: ring, Namespace: "p", MinReplicas: 1}, []string{"Options.MinReplicas", "*redis.Ring", "connection that ran"}},
	} {
		d, err := redislocks.New(tc.opts)
		if d != nil || !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalid", tc.opts, d, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%+v) error %q does not say %q", tc.opts, err, w)
			}
		}
	}
	for _, cl := range []redislocks.Client{c, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})} {
		if _, err := redislocks.New(redislocks.Options{Client: cl, Namespace: "p", MinReplicas: 2, MinReplicasTimeout: time.Second}); err != nil {
			t.Errorf("New(MinReplicas 2) on %T = %v, want nil", cl, err)
		}
		if cc, ok := cl.(*redis.ClusterClient); ok {
			_ = cc.Close()
		}
	}
}

// newReplicatedDriver returns a driver on c that waits for replicas, closed
// by t.Cleanup.
func newReplicatedDriver(t *testing.T, c redislocks.Client, ns string, replicas int, timeout time.Duration) *redislocks.Driver {
	t.Helper()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: ns, MinReplicas: replicas, MinReplicasTimeout: timeout})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// checkNotReplicated checks that err reports key's lease as not replicated,
// and that the key was given back: a driver without MinReplicas gets it.
func checkNotReplicated(t *testing.T, err error, key string, plain *redislocks.Driver) {
	t.Helper()
	if !errors.Is(err, redislocks.ErrNotReplicated) || !errors.Is(err, redislocks.ErrRedis) || errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Acquire = %v; want ErrNotReplicated and ErrRedis", err)
	}
	if !strings.Contains(err.Error(), strconv.Quote(key)) || !strings.Contains(err.Error(), "0 of the 1 replicas") {
		t.Errorf("error %q does not name the key and the replica count", err)
	}
	l, err := plain.Acquire(context.Background(), key, time.Minute)
	if err != nil {
		t.Fatalf("Acquire of the unreplicated key by another driver = %v; want the key released", err)
	}
	_ = l.Release(context.Background())
}

// Without a replica nothing can acknowledge the lease: Acquire fails with
// ErrNotReplicated after the WAIT timeout and leaves the key free.
func TestMinReplicasWithoutReplicas(t *testing.T) {
	c := redistest.Start(t).Client()
	d := newReplicatedDriver(t, c, "norepl", 1, 100*time.Millisecond)
	start := time.Now()
	_, err := d.Acquire(context.Background(), "job", time.Minute)
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("Acquire returned after %v, before the 100ms WAIT timeout", took)
	}
	checkNotReplicated(t, err, "job", newDriver(t, c, "norepl"))
}

// With a live replica the lease is granted, and the replica holds it the
// moment Acquire returns; the script and WAIT travel in one pipeline, also
// after the script cache was flushed.
func TestMinReplicasGrantsReplicatedLease(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	c := master.Client()
	counter := &commandCounter{}
	c.AddHook(counter)
	d := newReplicatedDriver(t, c, "repl", 1, 5*time.Second)
	ctx := context.Background()
	warm, err := d.Acquire(ctx, "warm", time.Minute) // loads the script, dials
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	for i, flush := range []bool{false, true} {
		if flush {
			if err := master.Client().ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		key := "job" + strconv.Itoa(i)
		counter.take()
		l, err := d.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("Acquire (script cache flushed: %v): %v", flush, err)
		}
		want := []string{"evalsha", "wait"}
		if flush {
			want = []string{"evalsha", "wait", "eval", "wait"}
		}
		if got := counter.take(); !slices.Equal(got, want) {
			t.Errorf("Acquire (script cache flushed: %v) sent %v; want %v", flush, got, want)
		}
		v, err := replica.Client().Get(ctx, "ndigo:{repl:"+key+"}:lock").Result()
		if err != nil || !strings.HasPrefix(v, strconv.FormatUint(l.Token(), 10)+":") {
			t.Errorf("replica's copy of the lease = %q, %v; want token %d", v, err, l.Token())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A replica that is alive but not answering (SIGSTOP) does not acknowledge:
// Acquire fails with ErrNotReplicated and gives the key back, and Extend
// fails and keeps the lease's earlier deadline. This also shows WAIT runs on
// the script's connection: on any other connection it would count the
// paused replica, which acknowledged everything before.
func TestMinReplicasPausedReplica(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	c := master.Client()
	d := newReplicatedDriver(t, c, "paused", 1, 200*time.Millisecond)
	plain := newDriver(t, c, "paused")
	clock := clockwork.NewFakeClock()
	faked, err := redislocks.New(redislocks.Options{Client: c, Namespace: "paused", Clock: clock, MinReplicas: 1, MinReplicasTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held, err := faked.Acquire(ctx, "held", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := held.Done()

	replica.Pause()
	_, err = d.Acquire(ctx, "job", time.Minute)
	checkNotReplicated(t, err, "job", plain)
	// An extension the replica misses fails and keeps the earlier deadline:
	// Done closes 10s after the Acquire on the driver's clock, not later.
	if err := held.Extend(ctx, time.Minute); !errors.Is(err, redislocks.ErrNotReplicated) || !errors.Is(err, redislocks.ErrRedis) ||
		!strings.Contains(err.Error(), `"held"`) {
		t.Errorf("Extend with the replica paused = %v; want ErrNotReplicated naming the key", err)
	}
	clock.Advance(10 * time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("Done did not close at the lease's first deadline after an unreplicated Extend")
	}
	// The cap of half the TTL applies: with a 10s timeout, a 1s lease waits
	// 500ms.
	patient := newReplicatedDriver(t, c, "paused", 1, 10*time.Second)
	start := time.Now()
	_, err = patient.Acquire(ctx, "short", time.Second)
	if took := time.Since(start); !errors.Is(err, redislocks.ErrNotReplicated) || !strings.Contains(err.Error(), "within 500ms") || took >= 5*time.Second {
		t.Errorf("Acquire of a 1s lease with a 10s timeout = %v after %v; want ErrNotReplicated after a 500ms WAIT", err, took)
	}
	// So does half the client's read timeout, and half of what is left of
	// the context: a timeout would leave the key held by nobody.
	short := newReplicatedDriver(t, master.Client(&redis.Options{ReadTimeout: 400 * time.Millisecond}), "paused", 1, 10*time.Second)
	_, err = short.Acquire(ctx, "read-timeout", time.Minute)
	if !errors.Is(err, redislocks.ErrNotReplicated) || !strings.Contains(err.Error(), "within 200ms") {
		t.Errorf("Acquire with a 400ms read timeout = %v; want ErrNotReplicated after a 200ms WAIT", err)
	}
	deadline, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	_, err = patient.Acquire(deadline, "deadline", time.Minute)
	cancel()
	if !errors.Is(err, redislocks.ErrNotReplicated) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with a 600ms deadline = %v; want ErrNotReplicated before the deadline", err)
	}
	replica.Resume()
	master.WaitReplicated()

	l, err := d.Acquire(ctx, "job", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after Resume: %v", err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Errorf("Extend after Resume: %v", err)
	}
	_ = l.Release(ctx)
}

// On a Cluster the script and WAIT run on the master owning the key's slot
// (a pipeline on the cluster client would send WAIT to any node). The
// cluster's masters have no replicas, so the lease is never granted.
func TestMinReplicasCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3).Client()
	d := newReplicatedDriver(t, c, "cluster", 1, 100*time.Millisecond)
	plain := newDriver(t, c, "cluster")
	for _, key := range []string{"a", "b", "c", "d"} {
		_, err := d.Acquire(context.Background(), key, time.Minute)
		checkNotReplicated(t, err, key, plain)
	}
}

// The pipelined path (script and WAIT) keeps every driver semantic.
func TestConformanceMinReplicas(t *testing.T) {
	master := redistest.Start(t)
	redistest.StartReplica(t, master)
	c := master.Client()
	lockstest.Run(t, lockstest.Harness{
		NewDriver: func(t *testing.T) locks.Driver {
			return newReplicatedDriver(t, c, "conformance", 1, 0)
		},
		// WAIT waits up to half the TTL (the default MinReplicasTimeout, 1s,
		// capped): a quarter of a second for the replica's acknowledgement
		// holds on a loaded machine, where 50ms did not.
		TTL: 500 * time.Millisecond,
		// The LostReply cases check what a lost reply does, not a slow
		// replica: a WAIT of a second, which a busy machine does not miss.
		NewDrivers: lossyDrivers(c, master.Addr(), func(t *testing.T, c redislocks.Client) locks.Driver {
			return newReplicatedDriver(t, c, "conformance", 1, time.Second)
		}),
	})
}
