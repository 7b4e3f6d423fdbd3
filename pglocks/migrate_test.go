package pglocks_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

// previous returns a statement of the previous layout (testdata/v1) with
// the tables named after table filled in, as that version filled them.
func previous(t *testing.T, file, table string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/v1/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("$LOCKS", pgx.Identifier{table}.Sanitize(), "$CLAIMS", pgx.Identifier{table + "_claims"}.Sanitize(),
		"$EXPIRY", pgx.Identifier{table + "_expiry"}.Sanitize()).Replace(string(b))
}

// primaryKey returns the definition of table's primary key.
func primaryKey(t *testing.T, p *pgxpool.Pool, table string) string {
	t.Helper()
	var def string
	err := p.QueryRow(context.Background(),
		"SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'", table).Scan(&def)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestMigratesThePreviousLayout: tables that the previous version created
// and used (a primary key on (ns, key), tokens counted per row) are
// migrated by CreateSchema: the primary keys become (ns, digest), the free
// rows go and the live ones stay (a held key is still held, a live claim
// still refuses its seq), every token minted afterwards is above every
// token of the old rows, keys longer than the old index allowed work, a
// second CreateSchema changes nothing, and the previous version's Acquire
// and Claim statements now fail instead of counting a token from a row.
func TestMigratesThePreviousLayout(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	table := strings.ToLower(unique("migrated"))
	if _, err := p.Exec(ctx, previous(t, "schema.sql", table), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	oldAcquire, oldClaim := previous(t, "acquire.sql", table), previous(t, "claim.sql", table)
	ns := "migrated"
	acquire := func(key string, ttl time.Duration) (token int64) {
		t.Helper()
		if err := p.QueryRow(ctx, oldAcquire, ns, key, ttl.Microseconds()).Scan(&token); err != nil {
			t.Fatalf("the previous version's Acquire(%q): %v", key, err)
		}
		return token
	}
	for range 3 {
		acquire("released", time.Microsecond) // expired at once: free
	}
	heldToken := acquire("held", time.Hour)
	for range 40 {
		acquire("busy", time.Microsecond)
	}
	if _, err := p.Exec(ctx, oldClaim, ns, "claimed", int64(100), time.Hour.Microseconds()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, oldClaim, ns, "claim-expired", int64(5), int64(1)); err != nil {
		t.Fatal(err)
	}

	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema on the previous layout: %v", err)
	}
	for _, tbl := range []string{table, table + "_claims"} {
		if got := primaryKey(t, p, tbl); got != "PRIMARY KEY (ns, digest)" {
			t.Errorf("%s: %s after the migration, want PRIMARY KEY (ns, digest)", tbl, got)
		}
	}
	var rows, claims int
	if err := p.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+"), (SELECT count(*) FROM "+
		pgx.Identifier{table + "_claims"}.Sanitize()+")").Scan(&rows, &claims); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || claims != 1 {
		t.Errorf("%d lock rows and %d claim rows after the migration, want the live ones: 1 and 1", rows, claims)
	}
	if l, err := d.Acquire(ctx, "held", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Acquire of the key held before the migration = %v, %v; want ErrNotAcquired", l, err)
	}
	if ok, err := d.Claim(ctx, "claimed", 100, time.Minute); ok || err != nil {
		t.Errorf("Claim of the seq claimed before the migration = %v, %v; want false", ok, err)
	}
	if ok, err := d.Claim(ctx, "claimed", 101, time.Minute); !ok || err != nil {
		t.Errorf("Claim of the next seq = %v, %v; want true", ok, err)
	}
	if ok, err := d.Claim(ctx, "claim-expired", 1, time.Minute); !ok || err != nil {
		t.Errorf("Claim of a key whose claim had expired = %v, %v; want true", ok, err)
	}
	var last uint64
	for _, key := range []string{"busy", "released", "new", strings.Repeat("long key ", 1000)} {
		l, err := d.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("Acquire(%.20q…) after the migration: %v", key, err)
		}
		if l.Token() <= 40 || l.Token() <= last {
			t.Fatalf("Acquire(%.20q…) after the migration: token %d, want above every old token (the highest: 40) and the last minted (%d)", key, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	l, err := d.Acquire(ctx, "busy", time.Minute)
	if err != nil || l.Token() <= last {
		t.Fatalf("Acquire after a second CreateSchema = %v, %v; want a token above %d", l, err, last)
	}
	if uint64(heldToken) >= l.Token() {
		t.Fatalf("token %d not above the held lease's %d", l.Token(), heldToken)
	}
	var token int64
	if err := p.QueryRow(ctx, oldAcquire, ns, "new-old", int64(1000)).Scan(&token); err == nil || !strings.Contains(err.Error(), "ON CONFLICT") {
		t.Errorf("the previous version's Acquire on the migrated table = token %d, %v; want an error (no constraint matches its ON CONFLICT)", token, err)
	}
	if _, err := p.Exec(ctx, oldClaim, ns, "new-old", int64(1), int64(1000)); err == nil || !strings.Contains(err.Error(), "ON CONFLICT") {
		t.Errorf("the previous version's Claim on the migrated table = %v; want an error (no constraint matches its ON CONFLICT)", err)
	}
}
