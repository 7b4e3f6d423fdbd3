package redislocks_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/faultproxy"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// A lossy setup is a redis-server, a driver whose client has go-redis's
// default options (MaxRetries 3) and reaches the server through a proxy that
// can lose replies, and a second driver on a direct client.
type lossy struct {
	proxy  *faultproxy.Proxy
	direct *redis.Client
	d      *redislocks.Driver // behind the proxy
	other  *redislocks.Driver // direct
}

func newLossy(t *testing.T) *lossy {
	t.Helper()
	s := redistest.Start(t)
	p, err := faultproxy.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	direct := s.Client()
	// Loaded scripts make each operation one EVALSHA, so the drop hits the
	// script's run and not a NOSCRIPT answer.
	for _, sc := range redislocks.Scripts {
		if err := sc.Load(context.Background(), direct).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return &lossy{proxy: p, direct: direct, d: newDriver(t, c, "retry"), other: newDriver(t, direct, "retry")}
}

// dropFirstReply loses the reply to the next run of script on key's lock
// (or claim) and returns the match of those runs.
func (s *lossy) dropFirstReply(sha, redisKey string) faultproxy.Match {
	m := faultproxy.And(faultproxy.Script(sha), faultproxy.Arg(redisKey))
	s.proxy.DropReply(m)
	return m
}

// retried fails t unless the proxy dropped one reply and the client sent
// the script twice: the call's first attempt ran and go-redis retried it.
func (s *lossy) retried(t *testing.T, m faultproxy.Match) {
	t.Helper()
	if n, dropped := s.proxy.Count(m), s.proxy.Dropped(); n != 2 || dropped != 1 {
		t.Fatalf("the script was sent %d times with %d replies dropped; want 2 and 1: the test must exercise a retry", n, dropped)
	}
}

// A retried Acquire gets the lease its first attempt took, with that
// attempt's token, instead of ErrNotAcquired from its own lease.
func TestAcquireRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	m := s.dropFirstReply(redislocks.AcquireSHA, "ndigo:{retry:k}:lock")
	l, err := s.d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Acquire whose first reply was lost: %v, want the lease", err)
	}
	s.retried(t, m)
	v, err := s.direct.Get(ctx, "ndigo:{retry:k}:lock").Result()
	if err != nil || !strings.HasPrefix(v, strconv.FormatUint(l.Token(), 10)+":") {
		t.Fatalf("lock value = %q, %v; want the returned token %d", v, err, l.Token())
	}
	if _, err := s.other.Acquire(ctx, "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("another driver's Acquire = %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release of the retried Acquire's lease: %v", err)
	}
	next, err := s.other.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the Release: %v, want the key free", err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("next token %d not above %d", next.Token(), l.Token())
	}
}

// A retried Release whose first attempt deleted the key returns nil, and
// the key is free.
func TestReleaseRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	l, err := s.d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	m := s.dropFirstReply(redislocks.ReleaseSHA, "ndigo:{retry:k}:lock")
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release whose first reply was lost: %v, want nil", err)
	}
	s.retried(t, m)
	select {
	case <-done:
	default:
		t.Fatal("Done still open after the Release")
	}
	if n, err := s.direct.Exists(ctx, "ndigo:{retry:k}:lock").Result(); err != nil || n != 0 {
		t.Fatalf("lock key exists = %d, %v; want it deleted", n, err)
	}
	next, err := s.other.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the Release: %v, want the key free", err)
	}
	_ = next.Release(ctx)
}

// A Release that failed with ErrRedis after its first attempt deleted the
// key (every reply lost), called again after a successor took the key,
// returns nil and leaves the successor's lease alone.
func TestReleaseAgainAfterLostRepliesAndASuccessor(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	l, err := s.d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := faultproxy.And(faultproxy.Script(redislocks.ReleaseSHA), faultproxy.Arg("ndigo:{retry:k}:lock"))
	for range 4 { // the first attempt and go-redis's 3 retries
		s.proxy.DropReply(m)
	}
	if err := l.Release(ctx); !errors.Is(err, redislocks.ErrRedis) {
		t.Fatalf("Release with every reply lost = %v, want ErrRedis", err)
	}
	if n := s.proxy.Count(m); n != 4 {
		t.Fatalf("the release script was sent %d times, want 4", n)
	}
	successor, err := s.other.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the lost Release: %v, want the key free", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release again after a successor acquired: %v, want nil (the first attempt released it)", err)
	}
	if _, err := s.d.Acquire(ctx, "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Acquire while the successor holds = %v, want ErrNotAcquired", err)
	}
	if err := successor.Release(ctx); err != nil {
		t.Fatalf("successor Release: %v", err)
	}
}

// A retried Extend whose first attempt extended the lease returns nil, and
// the TTL was extended.
func TestExtendRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	l, err := s.d.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := s.dropFirstReply(redislocks.ExtendSHA, "ndigo:{retry:k}:lock")
	if err := l.Extend(ctx, time.Hour); err != nil {
		t.Fatalf("Extend whose first reply was lost: %v, want nil", err)
	}
	s.retried(t, m)
	if ttl, err := s.direct.PTTL(ctx, "ndigo:{retry:k}:lock").Result(); err != nil || ttl < 59*time.Minute {
		t.Fatalf("lock PTTL = %v, %v; want about an hour", ttl, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the retried Extend: %v", err)
	}
}

// A retried Claim whose first attempt recorded the claim answers true, and
// another claimant of the same seq gets false.
func TestClaimRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	m := s.dropFirstReply(redislocks.ClaimSHA, "ndigo:{retry:k}:claim")
	if ok, err := s.d.Claim(ctx, "k", 10, time.Minute); !ok || err != nil {
		t.Fatalf("Claim whose first reply was lost = %v, %v; want true", ok, err)
	}
	s.retried(t, m)
	if ok, err := s.other.Claim(ctx, "k", 10, time.Minute); ok || err != nil {
		t.Fatalf("another claimant of the same seq = %v, %v; want false", ok, err)
	}
}

// A retried AcquireClaims of many fires (one script) answers what its first
// attempt did for each: the leases it took, and the fires it found held or
// claimed as such, not the retry's view of its own leases and claims.
func TestAcquireClaimsRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	if _, err := s.other.Acquire(ctx, "held", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.other.Claim(ctx, "claimed@task", 10, time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	m := s.dropFirstReply(redislocks.AcquireClaimSHA, "ndigo:{retry:a}:lock")
	fire := func(key string) locks.FireLock {
		return locks.FireLock{Key: key, TTL: time.Minute, Claim: locks.FireClaim{Key: key + "@task", Seq: 10, TTL: time.Minute}}
	}
	got := locks.AcquireClaims(ctx, s.d, []locks.FireLock{fire("a"), fire("held"), fire("claimed"), fire("b")})
	s.retried(t, m)
	for i, key := range []string{"a", "b"} {
		r := got[3*i]
		if r.Err != nil {
			t.Fatalf("fire on %s whose reply was lost: %v, want the lease", key, r.Err)
		}
		v, err := s.direct.Get(ctx, "ndigo:{retry:"+key+"}:lock").Result()
		if err != nil || !strings.HasPrefix(v, strconv.FormatUint(r.Lease.Token(), 10)+":") {
			t.Fatalf("lock value of %s = %q, %v; want the returned token %d", key, v, err, r.Lease.Token())
		}
	}
	if !errors.Is(got[1].Err, locks.ErrNotAcquired) || !errors.Is(got[2].Err, locks.ErrClaimed) {
		t.Fatalf("fires on a held key and a claimed fire: %v, %v; want ErrNotAcquired and ErrClaimed", got[1].Err, got[2].Err)
	}
	if l, err := locks.AcquireClaim(ctx, s.other, "a", time.Minute, fire("a").Claim); !errors.Is(err, locks.ErrClaimed) {
		t.Fatalf("another claimant of a's fire = %v, %v; want ErrClaimed", l, err)
	}
}

// A retried AcquireClaim gets the lease and the claim its first attempt
// took, instead of ErrClaimed from its own claim: another claimant of the
// fire is refused, and the lease is the one the lock key holds.
func TestAcquireClaimRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	m := s.dropFirstReply(redislocks.AcquireClaimSHA, "ndigo:{retry:k}:lock")
	fire := locks.FireClaim{Key: "k@task", Seq: 10, TTL: time.Minute}
	l, err := locks.AcquireClaim(ctx, s.d, "k", time.Minute, fire)
	if err != nil {
		t.Fatalf("AcquireClaim whose first reply was lost: %v, want the lease", err)
	}
	s.retried(t, m)
	v, err := s.direct.Get(ctx, "ndigo:{retry:k}:lock").Result()
	if err != nil || !strings.HasPrefix(v, strconv.FormatUint(l.Token(), 10)+":") {
		t.Fatalf("lock value = %q, %v; want the returned token %d", v, err, l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release of the retried AcquireClaim's lease: %v", err)
	}
	if l, err := locks.AcquireClaim(ctx, s.other, "k", time.Minute, fire); !errors.Is(err, locks.ErrClaimed) {
		t.Fatalf("another claimant of the same fire = %v, %v; want ErrClaimed", l, err)
	}
	if ok, err := s.other.Claim(ctx, "k@task", 10, time.Minute); ok || err != nil {
		t.Fatalf("Claim of the same seq = %v, %v; want false: the retried call recorded it", ok, err)
	}
}

// The tombstone is the list of the key's leases released by their
// holders, newest first; it lives at least a minute after the last release
// and holds at most 16 entries however many releases it saw; a lease that
// expired leaves no entry.
func TestReleaseTombstone(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "tomb")
	var ids []string
	for range 40 {
		l, err := d.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Get(ctx, "ndigo:{tomb:k}:lock").Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{v}, ids...)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expired, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Deleting the key is what its expiry in Redis does.
	if err := c.Del(ctx, "ndigo:{tomb:k}:lock").Err(); err != nil {
		t.Fatal(err)
	}
	if err := expired.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Release of an expired lease = %v, want ErrLeaseLost", err)
	}
	tomb, err := c.LRange(ctx, "ndigo:{tomb:k}:released", 0, -1).Result()
	if err != nil || len(tomb) < 8 || len(tomb) > 16 || !slices.Equal(tomb, ids[:len(tomb)]) {
		t.Fatalf("tombstone = %q, %v; want 8 to 16 of the last released leases, newest first: %q", tomb, err, ids[:16])
	}
	if ttl, err := c.PTTL(ctx, "ndigo:{tomb:k}:released").Result(); err != nil || ttl <= time.Minute || ttl > 2*time.Minute {
		t.Fatalf("tombstone PTTL = %v, %v; want (1m, 2m]", ttl, err)
	}
}

// A Release that failed with ErrRedis after its first attempt released the
// key is answered nil again while its lease is among the key's last 8
// released, and ErrLeaseLost after.
func TestReleaseAgainRecognisedAmongTheLast8(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	m := faultproxy.And(faultproxy.Script(redislocks.ReleaseSHA), faultproxy.Arg("ndigo:{retry:k}:lock"))
	lost := func() locks.Lease { // a lease whose Release took effect, every reply lost
		t.Helper()
		l, err := s.d.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for range 4 { // the first attempt and go-redis's 3 retries
			s.proxy.DropReply(m)
		}
		if err := l.Release(ctx); !errors.Is(err, redislocks.ErrRedis) {
			t.Fatalf("Release with every reply lost = %v, want ErrRedis", err)
		}
		return l
	}
	ninth, eighth := lost(), lost()
	for range 7 {
		l, err := s.other.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := eighth.Release(ctx); err != nil {
		t.Fatalf("Release again of the 8th last released lease = %v, want nil", err)
	}
	if err := ninth.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Release again of the 9th last released lease = %v, want ErrLeaseLost", err)
	}
}
