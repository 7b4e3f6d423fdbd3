package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/bench/lockbench"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

// ttl is the lease of the contenders that have one; no benchmark lets it
// expire.
const ttl = 10 * time.Second

// table is the lock table of the driver (default
// Options.Table), quoted as the driver quotes it.
var table = pgx.Identifier{"ndigo_locks"}.Sanitize()

func ndigo(pool *pgxpool.Pool) (*lockbench.Contender, error) {
	d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "bench"})
	if err != nil {
		return nil, err
	}
	return lockbench.WaitFor(d, ttl, func() { _ = d.Close() }), nil
}

// ndigoListening is ndigo with one more watcher, of a key nobody locks,
// for the contender's life: the driver's listening connection then never
// idles out between the waits, which shows what its reconnections cost.
func ndigoListening(pool *pgxpool.Pool) (*lockbench.Contender, error) {
	d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "bench"})
	if err != nil {
		return nil, err
	}
	_, unwatch := d.Watch("bench-keep-listening")
	return lockbench.WaitFor(d, ttl, func() { unwatch(); _ = d.Close() }), nil
}

// ndigoLoop is the driver's Acquire in a retry loop, without locks.Wait:
// the driver's Go code and SQL, no Watch (so no listening connection), a
// held key retried after retry.
func ndigoLoop(pool *pgxpool.Pool, retry time.Duration) (*lockbench.Contender, error) {
	d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "bench"})
	if err != nil {
		return nil, err
	}
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			for {
				l, err := d.Acquire(ctx, key, ttl)
				if err == nil {
					return l.Release, nil
				}
				if !errors.Is(err, locks.ErrNotAcquired) {
					return nil, err
				}
				if err := sleep(ctx, retry); err != nil {
					return nil, err
				}
			}
		},
		Close: func() { _ = d.Close() },
	}, nil
}

// floorTable is the table of the write floors, a row per key.
var floorTable = pgx.Identifier{"pglockbench_floor"}.Sanitize()

// writeFloor is not a lock: it measures what a cycle that keeps its state
// in a row costs at least on this server. Lock updates the key's row (a
// HOT update of one row by primary key, the key's row inserted by the first
// call), and the release updates it again when writes is 2, or sends
// SELECT 1 when it is 1, each an unnamed statement as pglocks sends them:
// two statements per cycle, as every contender here. Nothing waits, so on
// one shared key the goroutines only take turns on the row's lock.
func writeFloor(pool *pgxpool.Pool, writes int) *lockbench.Contender {
	lock := "UPDATE " + floorTable + " SET n = n + 1, at = clock_timestamp() WHERE key = $1"
	release := "SELECT 1"
	if writes == 2 {
		release = "UPDATE " + floorTable + " SET at = '-infinity' WHERE key = $1"
	}
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			tag, err := pool.Exec(ctx, lock, pgx.QueryExecModeExec, key)
			if err == nil && tag.RowsAffected() == 0 {
				_, err = pool.Exec(ctx, "INSERT INTO "+floorTable+" VALUES ($1, 0, clock_timestamp()) ON CONFLICT DO NOTHING", pgx.QueryExecModeExec, key)
			}
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				if writes == 2 {
					_, err := pool.Exec(ctx, release, pgx.QueryExecModeExec, key)
					return err
				}
				_, err := pool.Exec(ctx, release, pgx.QueryExecModeExec)
				return err
			}, nil
		},
		Close: func() {},
	}
}

// advisoryID maps a key to the bigint of an advisory lock on the client,
// so that the server does no hashing the other contenders would not do.
func advisoryID(key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int64(h.Sum64())
}

// advisoryTry is the floor: pg_try_advisory_lock, and on success
// pg_advisory_unlock on the same connection, which a session lock needs, so
// each cycle holds a pool connection from lock to unlock. A held key gives
// the connection back and retries after retry. No TTL, no token, no
// notification.
func advisoryTry(pool *pgxpool.Pool, mode pgx.QueryExecMode, retry time.Duration) *lockbench.Contender {
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			id := advisoryID(key)
			for {
				conn, err := pool.Acquire(ctx)
				if err != nil {
					return nil, err
				}
				var ok bool
				if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", mode, id).Scan(&ok); err != nil {
					conn.Release()
					return nil, err
				}
				if ok {
					return advisoryUnlock(conn, mode, id), nil
				}
				conn.Release()
				if err := sleep(ctx, retry); err != nil {
					return nil, err
				}
			}
		},
		Close: func() {},
	}
}

// advisoryBlocking waits in the server: pg_advisory_lock returns when the
// session holding the key unlocks it.
func advisoryBlocking(pool *pgxpool.Pool, mode pgx.QueryExecMode) *lockbench.Contender {
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			id := advisoryID(key)
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", mode, id); err != nil {
				conn.Release()
				return nil, err
			}
			return advisoryUnlock(conn, mode, id), nil
		},
		Close: func() {},
	}
}

func advisoryUnlock(conn *pgxpool.Conn, mode pgx.QueryExecMode, id int64) func(context.Context) error {
	return func(ctx context.Context) error {
		defer conn.Release()
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", mode, id).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("advisory lock %d was not held", id)
		}
		return nil
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
