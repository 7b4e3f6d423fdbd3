package pglocks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/pgfault"
	"github.com/ndigo/ndigo/internal/pgproc"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/taskstate"
)

// shared is the server most tests of the package use; tests that kill or
// pause a server start their own.
var shared *pgproc.Server

func TestMain(m *testing.M) {
	s, err := pgproc.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = s
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { s.Stop() }))
}

// conformanceTTL is the suite's short lease: well above a round trip under
// -race on a busy machine, and well above the default drift margin.
const conformanceTTL = 200 * time.Millisecond

// pool returns a pool on the shared server with the schema created, closed
// by t.Cleanup.
func pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p := pgtest.Wrap(t, shared).Pool()
	d := newDriver(t, p, "schema")
	if err := d.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// runs numbers the keys and names that unique makes.
var runs atomic.Int64

// unique returns name made unique in this process and across runs on the
// shared server (go test -count=n runs each test n times on it).
func unique(name string) string {
	return fmt.Sprintf("%s_%d_%d", name, time.Now().UnixNano(), runs.Add(1))
}

// newSchema creates a PostgreSQL schema of its own for a test and returns
// its name.
func newSchema(t *testing.T, p *pgxpool.Pool, name string) string {
	t.Helper()
	schema := unique(name)
	if _, err := p.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// earlierStore stands for the tables of a version before some of them: a
// store's schema in a schema of its own, without the tables named (their
// names after the store's table prefix, such as "_events"), and a store on
// it whose task Payroll.Close is paused. It returns the store's options, to
// open the current version on the same tables, and the store.
func earlierStore(t *testing.T, p *pgxpool.Pool, name string, dropped ...string) (pglocks.StoreOptions, *pglocks.Store) {
	t.Helper()
	ctx := context.Background()
	schema := newSchema(t, p, name)
	opts := pglocks.StoreOptions{Pool: p, Namespace: "earlier", Table: schema + ".tasks"}
	earlier, err := pglocks.NewStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := earlier.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	for i, d := range dropped {
		dropped[i] = opts.Table + d
	}
	if _, err := p.Exec(ctx, "DROP TABLE "+strings.Join(dropped, ", ")); err != nil {
		t.Fatal(err)
	}
	if err := earlier.SetPaused(ctx, "Payroll.Close", taskstate.Pause{Paused: true}); err != nil {
		t.Fatal(err)
	}
	return opts, earlier
}

func newDriver(t testing.TB, p *pgxpool.Pool, ns string) *pglocks.Driver {
	t.Helper()
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	p := pool(t)
	lockstest.Run(t, lockstest.Harness{
		NewDriver:  func(t *testing.T) locks.Driver { return newDriver(t, p, "conformance") },
		TTL:        conformanceTTL,
		NewDrivers: lossyDrivers(shared.URL(), p),
	})
}

// lossyDrivers returns a factory of two drivers in a new namespace, as two
// nodes have: A on a pool of its own on url, whose connections lose the
// replies the suite asks (internal/pgfault), B on p. pgx does not resend a
// statement whose reply was lost: A's call fails.
func lossyDrivers(url string, p *pgxpool.Pool) func(*testing.T) lockstest.Drivers {
	return func(t *testing.T) lockstest.Drivers {
		ns := unique("lost")
		d := &pgfault.Dialer{}
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DialFunc = d.DialContext
		a, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		return lockstest.Drivers{A: newDriver(t, a, ns), B: newDriver(t, p, ns), Loss: lockstest.Failed,
			LoseReply: d.LoseNthReply,
			Leaks:     func(t *testing.T) error { return lockLeaks(context.Background(), p, ns) }}
	}
}

// lockLeaks returns an error naming the tables in which namespace ns (in
// the default tables) keeps more rows than a LostReply case can leave
// there: its lock keys (two slots at most) each keep a row, held or free
// (see the package doc's bound), its claim key one, and its members none,
// since each case's members leave.
func lockLeaks(ctx context.Context, p *pgxpool.Pool, ns string) error {
	var problems []string
	for _, c := range []struct {
		table string
		max   int
	}{{"ndigo_locks", 2}, {"ndigo_locks_claims", 1}, {"ndigo_locks_members", 0}} {
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM "+c.table+" WHERE ns = $1", pgx.QueryExecModeExec, ns).Scan(&n); err != nil {
			return err
		}
		if n > c.max {
			problems = append(problems, fmt.Sprintf("%s: %d rows, want %d at most", c.table, n, c.max))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("namespace %q: %s", ns, strings.Join(problems, "; "))
	}
	return nil
}

func TestNewRejectsBadOptions(t *testing.T) {
	p := pool(t)
	for _, ns := range []string{"", "prod:eu", "a{b}", "a b", "ünïcode", "a\nb", strings.Repeat("x", 65)} {
		d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns})
		if d != nil || !errors.Is(err, pglocks.ErrInvalidNamespace) || !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("New(Namespace %q) = %v, %v; want ErrInvalidNamespace wrapping locks.ErrInvalid", ns, d, err)
		}
	}
	for _, table := range []string{"Locks", "a.b.c", "1locks", "lo cks", `lo"cks`, "locks;drop", ".locks", "s.", strings.Repeat("x", 57)} {
		if _, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "prod", Table: table}); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("New(Table %q) = %v, want ErrInvalid", table, err)
		}
	}
	bad := []pglocks.Options{
		{Namespace: "prod"},
		{Pool: p, Namespace: "prod", DriftRatio: -0.1},
		{Pool: p, Namespace: "prod", DriftRatio: 0.5},
		{Pool: p, Namespace: "prod", MinDrift: -time.Millisecond},
	}
	for _, o := range bad {
		if _, err := pglocks.New(o); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	for _, o := range []pglocks.Options{
		{Pool: p, Namespace: "Prod_1", Table: "public.my_locks"},
		{Pool: p, Namespace: "eu-west.2", Table: strings.Repeat("y", 56)},
	} {
		if _, err := pglocks.New(o); err != nil {
			t.Errorf("New(%+v) = %v, want nil", o, err)
		}
	}
}

// TestKeysPostgresCannotHold: keys that text cannot hold are ErrInvalid,
// not ErrDatabase; any other key, quotes and SQL included, is just a key.
func TestKeysPostgresCannotHold(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	d := newDriver(t, p, "keys")
	for _, key := range []string{"a\x00b", "\xff", "ok\xc3"} {
		if l, err := d.Acquire(ctx, key, time.Minute); !errors.Is(err, locks.ErrInvalid) || l != nil {
			t.Errorf("Acquire(%q) = %v, %v; want ErrInvalid", key, l, err)
		}
		if _, err := d.Claim(ctx, key, 1, time.Minute); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("Claim(%q) = %v, want ErrInvalid", key, err)
		}
	}
	for _, key := range []string{"'; DROP TABLE ndigo_locks; --", `"quoted"`, "ünïcode/ключ", "$1", strings.Repeat("k", 10000)} {
		key += unique("")
		l, err := d.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("Acquire(%.40q): %v", key, err)
		}
		notAcquired(t, d, key)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreateSchema: CreateSchema is idempotent, also when nodes call it at
// once, and a schema-qualified table works.
func TestCreateSchema(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	schema := newSchema(t, p, "app")
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "schema", Table: schema + ".jobs_locks"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(ctx, "k", time.Minute); !errors.Is(err, pglocks.ErrDatabase) {
		t.Fatalf("Acquire before CreateSchema = %v, want ErrDatabase", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- d.CreateSchema(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent CreateSchema: %v", err)
		}
	}
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Claim(ctx, "k", 1, time.Minute); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	var n int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM "+schema+".jobs_locks JOIN "+schema+".jobs_locks_claims USING (ns, key)").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in app.jobs_locks and its claims: %d, %v; want 1", n, err)
	}
	_ = l.Release(ctx)
}

// TestNamespacesAreIsolated: one key in two namespaces is two locks, each
// with its own tokens.
func TestNamespacesAreIsolated(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	a, b := newDriver(t, p, "iso-a"), newDriver(t, p, "iso-b")
	key := unique("k")
	la, err := a.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("same key in another namespace: %v", err)
	}
	if ok, _ := a.Claim(ctx, key, 7, time.Minute); !ok {
		t.Fatal("claim in namespace a refused")
	}
	if ok, _ := b.Claim(ctx, key, 7, time.Minute); !ok {
		t.Fatal("claim in namespace b refused after a's")
	}
	_ = la.Release(ctx)
	_ = lb.Release(ctx)
	if got := a.String(); got != "pglocks (namespace iso-a)" || a.Namespace() != "iso-a" {
		t.Errorf("String() = %q, Namespace() = %q", got, a.Namespace())
	}
}

// TestPoolIsBorrowed: the driver never closes the pool.
func TestPoolIsBorrowed(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	d := newDriver(t, p, "borrow")
	l, err := d.Acquire(ctx, unique("k"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("pool after use: %v", err)
	}
}
