// Package pglocks is a locks.Driver on PostgreSQL: it makes a locked task
// single-executor across every node that shares one PostgreSQL database, and
// lets a holder make its own writes to that database conditional on still
// holding the lease (Guard).
//
// # What holds
//
// The database decides every lease: a key is held while its row's
// expires_at, set from the database's clock (clock_timestamp()) when the
// lease was acquired or extended, is in the future. Node clocks play no part
// in exclusion; only their rates matter, for Done (see Local expiry). Each
// operation is one round trip, a call of one of the driver's functions that
// is its own transaction, so it is atomic and, once committed, durable as the database makes commits
// durable (synchronous_commit, replication: a failover to a replica that
// lacks the last commits may lose them, as with any data).
//
// # SQL layout
//
// CreateSchema makes three tables (names from Options.Table, by default
// ndigo_locks, ndigo_locks_claims and ndigo_locks_members), a sequence and
// seven functions:
//
//	ndigo_locks         (ns, digest) primary key, key text, token bigint, expires_at timestamptz,
//	                    waited boolean
//	ndigo_locks_claims  (ns, digest) primary key, key text, seq bigint, expires_at timestamptz
//	                    index on (ns, expires_at)
//	ndigo_locks_members (ns, grp, member) primary key, expires_at timestamptz
//	                    (locks.Membership: one row per live member of a group)
//	ndigo_tokens_<h>    the sequence every fencing token comes from
//	ndigo_acquire_v5_<h>, ndigo_extend_v5_<h>, ndigo_release_v5_<h>,
//	ndigo_claim_v5_<h>, ndigo_guard_v5_<h>, ndigo_acquire_claim_v5_<h>,
//	ndigo_acquire_claims_v5_<h>
//	                    in the lock table's schema, <h> a hash of its name
//	                    (v4 before this version: nodes of both can run on
//	                    the same tables during an upgrade, see Waiting)
//
// A row is found by digest, the sha256 of its key's UTF-8 bytes, so a key
// of any length that locks.Check accepts (up to locks.MaxKeyLen, 1 MiB) fits
// the index (a btree entry holds about 2.7 KB); the key itself is kept in
// the row, shown in it and compared by every statement, so that two keys
// with one digest (a sha256 collision, of which none is known) never share
// a row: the second answers as held, and its claims as claimed. Keys are
// stored as text: Acquire and Claim reject a key that is not valid UTF-8
// or holds a NUL byte with locks.ErrInvalid.
//
// A lock row exists while its key is held, and after it is freed (released
// or expired) until an Acquire of another key reclaims it (see
// Reclamation). Its token column is the fencing token of the row's last
// acquisition, drawn from the sequence by the statement that takes the
// key, after it locked the row (or inserted it), so after the previous
// acquisition of the key committed. The sequence's values strictly increase
// for the life of the database, and PostgreSQL WAL-logs a sequence ahead of
// the values it hands out, so no value comes back after a crash and
// restart: tokens strictly increase per key because they increase overall,
// whether the key kept its row or got a new one, with no clock involved.
// (The tokens of one key are therefore not consecutive.)
//
// The statements, in the package's .sql files: Acquire updates a free row
// of the key that it could lock at once (UPDATE … WHERE ctid = (SELECT …
// WHERE expires_at <= clock_timestamp() FOR UPDATE SKIP LOCKED)), or, if
// the key has no row, inserts one (INSERT … ON CONFLICT DO NOTHING),
// returning the token; 0 means held. A held key's row is marked waited
// when the calling driver watches the key (see Waiting). Extend and
// Release are an UPDATE of the row WHERE token = the lease's AND expires_at
// > clock_timestamp(). Claim is INSERT … ON CONFLICT (ns, digest) DO UPDATE
// … WHERE seq < the new seq OR expires_at <= clock_timestamp(). An Acquire
// that inserts a row, and every Claim, also reclaim free rows in the same
// round trip (see Reclamation). AcquireClaims (locks.ClaimAcquirer: how
// the scheduler takes the locked fires due at one instant) is one function
// that calls Acquire's and Claim's for each fire, in the order of their
// keys (so that racing calls cannot deadlock), one round trip for up to 256
// fires; a claim refused gives back the lease just acquired in the same
// statement. Keys, namespaces, tokens and TTLs are always bind
// parameters; only the validated, quoted table names are part of the SQL
// text. Each operation's statements (Acquire's and Guard's: a few steps) are
// the body of a PL/pgSQL function, and the driver calls the function: PostgreSQL then plans the statement once per session
// and keeps the plan, where the statement sent itself as the unnamed
// statement (as PgBouncer's transaction mode needs) would be parsed and
// planned on every call, most of an operation's cost (three times the
// throughput of the same statements sent as they are).
//
// # Migration from the previous layout
//
// Tables made by the previous version (a primary key on (ns, key), tokens
// counted per row, rows never deleted) are migrated by CreateSchema, once,
// in its transaction: it locks each table, starts the sequence above every
// token in the lock table, deletes the free rows, and moves the rest to the
// new primary key. The live leases and claims are kept (a held key stays
// held, a claimed fire stays claimed). The table locks wait for the
// transactions open on the tables (a guarded one included), and the other
// nodes' calls wait behind them: a migration takes as long as the longest
// transaction then open, plus the rewrite of the rows left. The previous
// version's functions have other names and are left in place: a node of
// that version still sharing the tables extends and releases the leases it
// holds, but its Acquire and Claim fail with ErrDatabase (their ON CONFLICT
// (ns, key) matches no constraint any more), so it runs no locked fire and
// mints no token that could repeat one; upgrade every node, then drop the
// functions ndigo_acquire_<h>, ndigo_extend_<h>, ndigo_release_<h> and
// ndigo_claim_<h> if you like.
//
// # Reclamation
//
// A free row means the same as no row: the key's next Acquire takes it or
// inserts a new one, with a token above every earlier one either way. So
// an Acquire of a key without a row that is new to its driver (not among
// the last 1,024 distinct keys the driver acquired), before it inserts one, examines the 32
// rows of its namespace that follow the key's digest in the primary key
// (wrapping around; all the other rows, if there are fewer) and deletes the
// free ones among them, up to 8, skipping rows another transaction locks (a
// guarded one included), in the same round trip and with bounded work.
// Only those Acquires reclaim, and not the fires of an AcquireClaims call,
// whose statement is one transaction: it would keep the rows it deletes
// locked until its last fire is taken, and an Acquire of such a row's key
// on another node, finding it locked, answers held, so a fire nobody runs
// (AcquireClaims is how the scheduler takes its fires, whose keys are its
// tasks', a row each; TestFreeKeysAreNeverHeldByBatches). Those Acquires
// are the only calls that add a row, and
// the usual call (a key whose row exists) examines nothing, so its writes
// stay HOT updates (no index covers a column they change); a released row
// stays until then, so that a Release whose reply was lost can be called
// again. The bound, per namespace, with calls one at a time:
//
//	lock rows = keys held + free rows
//	an Acquire that inserts a row deletes min(8, free rows among the 32 it examines)
//
// So rows grow only when none of the rows an inserting Acquire examines is
// free. Exactly: a namespace that never holds more than 32 keys at once
// never has more lock rows than the most keys it has held at once (its
// inserting Acquires examine all its rows; one-off keys acquired and
// released one after another leave one row). Beyond that, digests are
// uniform, so the examined rows are a sample of the namespace's: rows grow
// only while fewer than about 1 in 32 is free, which keeps about keys held
// × 32/31 rows, and a burst of F keys freed at once (F leases expiring
// together) loses 8 rows per new key while they are most of the rows
// (TestOneOffKeysLeaveBoundedRows, over 10,000 one-off keys: the k-th new
// key after a burst of 500 leaves exactly k + 500 − 8k rows up to k = 50,
// and none of the burst by k = 100). Concurrent Acquires may skip the rows
// others lock, and so reclaim fewer. There is no background goroutine: a
// namespace that stops taking new keys keeps its free rows until it takes
// one again.
//
// A key the driver acquired lately puts its row back without reclaiming:
// its row was a free row that another key's Acquire reclaimed, and
// reclaiming for it would take the free rows of other keys in use, each of
// which would put its own back and reclaim in turn. Keys in use between
// their leases are free rows most of the time, so each inserting Acquire
// started a chain: at 64 goroutines on distinct keys, 69% of the cycles
// inserted a row and deleted others (an index entry and a dead row each),
// where they otherwise update their own row in place
// (TestKeysInUseKeepTheirRows: 40 keys in use and 10 one-off keys, 124 rows
// inserted, 426 before). Putting a row back adds none that the
// reclamation had not taken, so rows are at most the bound above plus the
// free rows of keys in use: at most 1,024 per driver, the keys each
// remembers (one namespace that cycles one key at a time through 20 keys
// keeps their 20 rows, where it kept 1 and inserted a row every time).
//
// A claim row (locks.Claimer) holds the latest sequence number claimed for
// its key and when that record expires; a successful claim overwrites it,
// so there is one row per key claimed, never one per fire: the scheduler
// claims under one key per task, so a task firing every second for a day
// leaves one claim row and one lock row. Claims reclaim the same way: each
// Claim statement also deletes up to 8 expired claim rows of other keys of
// its namespace, oldest first, so the claim table holds about the keys
// claimed within their TTL (the scheduler's claims live
// scheduling.ClaimTTL).
//
// # Guard
//
// Guard, called inside the holder's transaction, checks that the lease is
// still the live holder and locks its row FOR KEY SHARE until the
// transaction ends. While it is locked, every Acquire of the key skips the
// row and answers locks.ErrNotAcquired at once, even after the lease's TTL
// ran out, and no reclamation deletes it; the holder's own Extend and
// Release (FOR NO KEY UPDATE, which does not conflict with FOR KEY SHARE)
// still go through. So the holder's writes in that transaction commit only
// while no other node holds the key: a database-side fence that needs no
// token column in the caller's tables. A stale holder (expired, released
// or superseded) gets locks.ErrLeaseLost from Guard and should roll back.
// Keep guarded transactions short: a transaction that stays open keeps the
// key from every successor. In REPEATABLE READ and SERIALIZABLE, Guard
// judges the row only if the transaction's snapshot has its latest
// version, and otherwise returns a serialization failure (SQLSTATE 40001)
// to retry the transaction with: it never calls a live lease lost because
// the snapshot predates a renewal (see Guard).
//
// Acquire also answers ErrNotAcquired, rather than waiting, while another
// statement on the same key briefly locks its row (a concurrent Acquire,
// Extend or Release, or one reclaiming the free row): the key is then being
// taken, is held, or is free again a moment later. Its one wait is on
// another statement, never on a transaction of the caller's: two Acquires
// of a key without a row race to insert it, and the second waits for the
// first's statement to commit, then answers ErrNotAcquired.
//
// # Local expiry
//
// A lease's Done channel closes at a local monotonic deadline: the time the
// Acquire (or the last successful Extend) was sent plus the TTL, less a
// drift margin (Options.DriftRatio of the TTL plus Options.MinDrift, by
// default 1% plus 2ms). The database cannot set the expiry before the
// statement reaches it, so a holder that stops when Done closes stops before
// the database could hand the key to another node, as long as the two
// clocks' rates differ by less than the margin. TTLs are sent rounded up to
// whole microseconds. A TTL at or below the margin would give a lease whose
// Done closes before it opens: Acquire and Extend reject a TTL at or below
// [Driver.MinTTL] with locks.ErrInvalid.
//
// # Outcome unknown
//
// A call that returns ErrDatabase may or may not have taken effect: the
// statement may have committed before the connection failed or the context
// ended. pgx does not resend a statement, so each call runs at most once,
// and the driver never turns an unknown outcome into ErrNotAcquired or
// ErrLeaseLost. An Acquire that failed so may have taken the key: nobody
// holds its lease, and the key is free again when the TTL ends. An Extend
// may have extended: the local deadline stays the earlier one. A Release
// may have released: call it again, it answers nil as long as no successor
// acquired the key since and no Acquire of another key reclaimed its row
// (then ErrLeaseLost; the key is free either way). A Claim may have claimed: a later call for the
// same seq then answers false, so the fire is skipped rather than run twice.
// G2 of docs/GUARANTEES.md states the Redis driver's side of this: there
// go-redis resends a script whose reply was lost, and each call recognises
// its own resent effect; here no call is ever resent, so each answers only
// what its one attempt did, and an unknown outcome stays ErrDatabase, never
// "held" or "lost".
//
// # PgBouncer
//
// Every statement is sent with pgx.QueryExecModeExec (the extended protocol
// with the unnamed statement, no server-side prepared statements) and is a
// transaction of its own, except Guard's, which runs in the caller's
// transaction (and in REPEATABLE READ or SERIALIZABLE opens a
// subtransaction inside its function, which it ends itself); the pool's sessions carry no state of the driver (no
// advisory locks, no SET, no LISTEN). It therefore works through PgBouncer
// in transaction pooling mode, whatever the pool's default exec mode. Only
// Watch's listening connection needs a session of its own (see Waiting).
//
// # Contexts
//
// Each operation honours its context through pgx: an operation whose
// context ends returns ErrDatabase wrapping the context's error. pgx then
// cancels the statement on the server and, with its default settings,
// closes the connection if the server has not answered a second later, so
// a hung server delays the return by about that second.
//
// # Waiting
//
// The driver implements locks.Watcher with LISTEN/NOTIFY: locks.Wait wakes
// when the key is released instead of polling. Release notifies a channel
// named after the table (ndigo_released_ and a hash of its name) with a hash
// of the namespace and key, in the release statement itself; the
// notification is delivered when it commits, and wakes the longest-waiting
// watcher of the key in each driver. All waiters of a driver share
// one connection that LISTENs (Options.Listen, by default the pool's
// configuration, outside the pool), run by one goroutine that starts with
// the first Watch and stops a short while after the last watcher stops, or
// at once on Close. It needs a direct session: through PgBouncer in
// transaction mode, point Options.Listen at PostgreSQL itself (or a
// session-mode pool). Polling at the wait step remains the fallback for expiries
// and missed notifications; the listening connection is replaced after 10s
// of silence, waking every waiter.
//
// Only a release of a key that a watcher waited for notifies. An Acquire
// that finds the key held, by a driver with a watcher of the key (as
// locks.Wait has: it watches, then acquires), marks the key's row waited;
// the mark stays until the row is deleted (reclaimed while free), and the
// releases of a marked row notify. So a key that no watching driver ever
// found held costs no NOTIFY, which takes a database-wide lock from the
// notifying transaction's commit to its end, serializing the commits of
// every notifying transaction: at 16 goroutines on distinct keys, a
// notification per release halved the cycles (BENCHMARKS.md). The mark is
// made on the row's latest version and only while it is held, so a release
// that commits before it leaves the key free, and the Acquire takes it; a
// row that other statements keep locked through the Acquire's retries is
// left unmarked, and a watcher of the driver tries again 50ms later instead
// of at its poll step. Acquires inside AcquireClaims do not mark (the
// scheduler's wait for a held key is a locks.Wait, whose Acquires do). A
// watcher of a key whose holder expired (no release), and whose row was
// reclaimed and inserted again before the watcher's next Acquire, is woken
// by the new holder's release only if a watching driver found that holder
// too: otherwise it polls. During an upgrade from the previous version, its
// nodes' Acquires do not mark: their waiters poll for keys that nodes of
// this version release.
package pglocks

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/drift"
	"github.com/ndigo/ndigo/internal/namespace"
	"github.com/ndigo/ndigo/internal/remotelease"
	"github.com/ndigo/ndigo/internal/watchhub"
	"github.com/ndigo/ndigo/locks"
)

// Options configures a Driver made by New.
type Options struct {
	// Pool is the connection pool to borrow: the driver never closes it.
	// Required.
	Pool *pgxpool.Pool
	// Namespace isolates this driver's locks from those of other
	// environments sharing the database: it is part of every row's primary
	// key. Required: 1 to 64 characters from [A-Za-z0-9_.-], the rule of
	// redislocks.CheckNamespace.
	Namespace string
	// Table names the lock table, optionally schema-qualified
	// ("schema.table"); the claim table is its name plus "_claims". Each part
	// is 1 to 56 characters from [a-z0-9_], not starting with a digit. Empty
	// means "ndigo_locks", in the connection's search_path.
	Table string
	// Clock measures local lease deadlines; nil means the real clock.
	Clock clockwork.Clock
	// DriftRatio is the share of a lease's TTL by which Done closes early,
	// in [0, 0.5); zero means 0.01.
	DriftRatio float64
	// MinDrift is added to the drift margin; zero means 2ms, negative is
	// invalid.
	MinDrift time.Duration
	// Listen configures the connection that Watch LISTENs on: a session of
	// its own, so it must reach PostgreSQL directly or through a PgBouncer
	// in session mode (transaction mode does not carry notifications). Nil
	// means Pool's connection configuration.
	Listen *pgx.ConnConfig
	// Logger receives warnings about the listening connection; nil means
	// they are dropped.
	Logger *slog.Logger
}

const (
	defaultTable  = "ndigo_locks"
	claimsSuffix  = "_claims"
	membersSuffix = "_members"
)

// tablePart is one part of Options.Table: 56 bytes leave room for the
// claims suffix within PostgreSQL's 63-byte identifiers.
var tablePart = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,55}$`)

// A Driver is a locks.Driver, locks.ClaimAcquirer, locks.Watcher,
// locks.Membership and locks.MinTTLer on PostgreSQL. Make one with New; it is safe for concurrent use.
type Driver struct {
	pool    *pgxpool.Pool
	ns      string
	table   string // Options.Table as given or defaulted, unquoted
	sql     statements
	clock   clockwork.Clock
	margin  drift.Margin
	channel string // the notification channel of releases
	hub     *watchhub.Hub
	recent  recent // the keys acquired lately, which do not reclaim
}

var (
	_ locks.Driver        = (*Driver)(nil)
	_ locks.ClaimAcquirer = (*Driver)(nil)
	_ locks.MinTTLer      = (*Driver)(nil)
	_ locks.Watcher       = (*Driver)(nil)
)

// New returns a driver on opts.Pool. It does not contact the database: a
// bad address or a missing table shows up as ErrDatabase from the first
// operation. Call CreateSchema once (at startup or in a migration) before
// the first operation.
func New(opts Options) (*Driver, error) {
	if opts.Pool == nil {
		return nil, fmt.Errorf("%w: pglocks: Options.Pool must not be nil", locks.ErrInvalid)
	}
	if err := CheckNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("%w: Options.Namespace %q %v", ErrInvalidNamespace, opts.Namespace, err)
	}
	margin, err := drift.FromOptions("pglocks", opts.DriftRatio, opts.MinDrift)
	if err != nil {
		return nil, err
	}
	table := opts.Table
	if table == "" {
		table = defaultTable
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: pglocks: Options.Table %q has more than one '.': use table or schema.table", locks.ErrInvalid, table)
	}
	for _, p := range parts {
		if !tablePart.MatchString(p) {
			return nil, fmt.Errorf("%w: pglocks: Options.Table %q: %q must be 1 to 56 characters of [a-z0-9_], not starting with a digit",
				locks.ErrInvalid, table, p)
		}
	}
	claims := append([]string(nil), parts...)
	claims[len(claims)-1] += claimsSuffix
	d := &Driver{
		pool:  opts.Pool,
		ns:    opts.Namespace,
		table: table,
		sql:   newStatements(parts, claims),
		clock: opts.Clock,
	}
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	d.margin = margin
	d.channel = channelName(table)
	listen := opts.Listen
	if listen == nil {
		listen = opts.Pool.Config().ConnConfig
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &listener{cfg: listen, channel: d.channel, log: log}
	d.hub = watchhub.New(l.listen)
	l.hub = d.hub
	return d, nil
}

// CheckNamespace says why ns cannot be a namespace, or returns nil: a
// namespace is 1 to 64 bytes of A-Z, a-z, 0-9, '_', '.' and '-', the same
// rule as redislocks.CheckNamespace, so that one namespace setting suits
// both drivers. New applies it to Options.Namespace.
func CheckNamespace(ns string) error { return namespace.Check(ns) }

// CreateSchema creates the lock and claim tables if they do not exist, and
// creates or replaces the driver's functions (see the package
// documentation), in one transaction. It is idempotent and safe to call
// from several nodes at once: a transaction-scoped advisory lock makes them
// take turns. The schema of a schema-qualified Options.Table must exist.
func (d *Driver) CreateSchema(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: ctx must not be nil", locks.ErrInvalid)
	}
	var err error
	for range 3 {
		// The simple protocol runs both statements as one transaction.
		_, err = d.pool.Exec(ctx, d.sql.schema, pgx.QueryExecModeSimpleProtocol)
		// CREATE TABLE IF NOT EXISTS run at once by two sessions may fail
		// in one of them on the catalog's unique index (unique_violation,
		// duplicate_table, or duplicate_object for the table's row type):
		// the table now exists, and the next try sees it.
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "42P07" && pgErr.Code != "42710") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: create schema (table %s): %w", ErrDatabase, d.table, err)
	}
	return nil
}

// Namespace returns the driver's namespace.
func (d *Driver) Namespace() string { return d.ns }

// String describes the driver for logs: "pglocks (namespace ns)". It names
// no address or credential.
func (d *Driver) String() string { return "pglocks (namespace " + d.ns + ")" }

// MinTTL implements locks.MinTTLer: it returns the largest TTL whose lease
// would end locally (Done closed) no later than it starts, because the
// drift margin DriftRatio*ttl + MinDrift is at least the TTL. Acquire and
// Extend reject a TTL at or below it with locks.ErrInvalid.
func (d *Driver) MinTTL() time.Duration { return d.margin.MinTTL() }

// checkKey rejects a key that PostgreSQL's text type cannot hold: invalid
// UTF-8, or a NUL byte.
func checkKey(key string) error {
	if !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: pglocks: key %q must be valid UTF-8 without NUL bytes (PostgreSQL text)", locks.ErrInvalid, key)
	}
	return nil
}

// micros rounds ttl up to whole microseconds, so that the database never
// expires a lease before the local deadline.
func micros(ttl time.Duration) int64 {
	us := int64(ttl / time.Microsecond)
	if ttl%time.Microsecond > 0 {
		us++
	}
	return us
}

// Acquire implements locks.Driver in one round trip (see the package
// documentation). It never waits on a held key, nor on a row that a guarded
// transaction locks: both answer locks.ErrNotAcquired.
func (d *Driver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.Check(ctx, key, ttl); err != nil {
		return nil, err
	}
	if err := d.margin.Check("pglocks", key, ttl); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	// A driver with a watcher of the key marks its row waited when the key
	// is held, so that the holder's Release notifies (see Waiting); a key
	// it acquired lately does not reclaim (see recent).
	sum := keySum(d.ns, key)
	p := hex.EncodeToString(sum[:])
	watched, reclaim := d.hub.Waiting(p) > 0, !d.recent.has(sum)
	sent := d.clock.Now()
	var token int64
	err := d.pool.QueryRow(ctx, d.sql.acquire, pgx.QueryExecModeExec, d.ns, key, micros(ttl), reclaim, watched).Scan(&token)
	if err != nil {
		return nil, fmt.Errorf("%w: acquire key %q: %w", ErrDatabase, key, withContext(ctx, err))
	}
	if token <= 0 {
		if token < 0 {
			// Held, and its row stayed locked by other statements, so
			// unmarked: its Release may notify nobody. A watcher tries
			// again soon instead of at its poll step.
			d.hub.WakeAfter(p, remarkAfter)
		}
		return nil, fmt.Errorf("%w: key %q is held", locks.ErrNotAcquired, key)
	}
	d.recent.add(sum)
	return &handle{remotelease.New("pglocks", key, uint64(token), d.clock, d.margin, sent, ttl), d}, nil
}

// remarkAfter is how soon a watcher of a key tries again after an Acquire
// found the key held but could not mark its row waited: a few times the
// retries (2, 4 and 8ms) that the Acquire spent on the locked row.
const remarkAfter = 50 * time.Millisecond

// maxFiresPerCall bounds the fires of one AcquireClaims statement: its
// transaction keeps the rows it locks until the last fire is taken.
const maxFiresPerCall = 256

// AcquireClaims implements locks.ClaimAcquirer in one statement for up to
// 256 fires (more take one more per 256), a function that CreateSchema
// creates and that calls, for each fire, Acquire's and Claim's. Its fires
// are one transaction: an error in one fails them all and takes none. On a
// schema that CreateSchema of an earlier version made, without that
// function, each fire is taken on its own (Acquire, then Claim, for a
// schema without acquire_claim either) until CreateSchema runs again.
func (d *Driver) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	out := make([]locks.FireLease, len(fires))
	var batch []int // the fires with valid input
	for i, f := range fires {
		err := locks.CheckFireLock(ctx, f)
		if err == nil {
			err = d.margin.Check("pglocks", f.Key, f.TTL)
		}
		if err == nil {
			err = checkKey(f.Key)
		}
		if err == nil {
			err = checkKey(f.Claim.Key)
		}
		if out[i].Err = err; err == nil {
			batch = append(batch, i)
		}
	}
	for len(batch) > 0 {
		n := min(len(batch), maxFiresPerCall)
		d.acquireClaims(ctx, fires, batch[:n], out)
		batch = batch[n:]
	}
	return out
}

// acquireClaims takes the fires of batch (indexes into fires, whose input
// is valid) in one statement and sets their results in out.
func (d *Driver) acquireClaims(ctx context.Context, fires []locks.FireLock, batch []int, out []locks.FireLease) {
	sent := d.clock.Now()
	replies, err := d.acquireClaimsCall(ctx, fires, batch)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42883" { // undefined_function: an earlier schema
		for _, i := range batch {
			if f := fires[i]; len(batch) == 1 {
				out[i].Lease, out[i].Err = locks.AcquireThenClaim(ctx, d, f.Key, f.TTL, f.Claim)
			} else {
				d.acquireClaims(ctx, fires, []int{i}, out)
			}
		}
		return
	}
	for j, i := range batch {
		f := fires[i]
		c := f.Claim
		switch {
		case err != nil:
			out[i].Err = fmt.Errorf("%w: acquire key %q and claim %q: %w", ErrDatabase, f.Key, c.Key, withContext(ctx, err))
		case replies[j] < 0:
			out[i].Err = fmt.Errorf("%w: claim key %q of %d", locks.ErrClaimed, c.Key, c.Seq)
		case replies[j] == 0:
			out[i].Err = fmt.Errorf("%w: key %q is held", locks.ErrNotAcquired, f.Key)
		default:
			out[i].Lease = &handle{remotelease.New("pglocks", f.Key, uint64(replies[j]), d.clock, d.margin, sent, f.TTL), d}
		}
	}
}

// acquireClaimsCall runs the fires of batch through the acquire_claim
// function (one fire) or acquire_claims (more), and returns their replies.
func (d *Driver) acquireClaimsCall(ctx context.Context, fires []locks.FireLock, batch []int) ([]int64, error) {
	if len(batch) == 1 {
		f := fires[batch[0]]
		var reply int64
		err := d.pool.QueryRow(ctx, d.sql.acquireClaim, pgx.QueryExecModeExec, d.ns, f.Key, micros(f.TTL),
			f.Claim.Key, f.Claim.Seq, micros(f.Claim.TTL), f.Claim.EvenIfHeld, true).Scan(&reply)
		return []int64{reply}, err
	}
	n := len(batch)
	keys, ttls, claimKeys, seqs, claimTTLs, evenIfHeld := make([]string, n), make([]int64, n), make([]string, n), make([]int64, n), make([]int64, n), make([]bool, n)
	for j, i := range batch {
		f := fires[i]
		keys[j], ttls[j], claimKeys[j], seqs[j], claimTTLs[j], evenIfHeld[j] = f.Key, micros(f.TTL), f.Claim.Key, f.Claim.Seq, micros(f.Claim.TTL), f.Claim.EvenIfHeld
	}
	rows, err := d.pool.Query(ctx, d.sql.acquireClaims, pgx.QueryExecModeExec, d.ns, keys, ttls, claimKeys, seqs, claimTTLs, evenIfHeld)
	if err != nil {
		return nil, err
	}
	replies, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err == nil && len(replies) != n {
		err = fmt.Errorf("the statement answered %d rows for %d fires", len(replies), n)
	}
	return replies, err
}

// Watch implements locks.Watcher. The first Watch of an idle driver opens
// the listening connection (Options.Listen) and waits, up to half a
// second, until LISTEN is confirmed, so that a release right after Watch
// returns is not missed. Every Release that frees a key notifies, and the
// notification wakes one watcher of the key in every driver on the table,
// the one that has waited longest: waking them all would send them all to
// Acquire for a key only one can take. A woken watcher that gives up
// instead of acquiring leaves the others to their poll step (locks.Wait's
// Step). The channel may also close spuriously, for example after the
// listening connection reconnects, which wakes every watcher.
func (d *Driver) Watch(key string) (<-chan struct{}, func()) {
	return d.hub.Watch(payload(d.ns, key))
}

// Close stops the listening connection, if it runs, and waits for its
// goroutine to end. It does not close the Pool. The driver stays usable: a
// later Watch listens again. Calling Close is optional (the listener stops
// on its own shortly after the last watcher stops), but tests that check
// for leaked goroutines should call it.
func (d *Driver) Close() error {
	d.hub.Close()
	return nil
}

// Claim implements locks.Claimer in one statement on the claim table. pgx
// sends the statement once, so each call answers what it did; a call that
// fails with ErrDatabase may have claimed (see Outcome unknown).
func (d *Driver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	if err := locks.CheckClaim(ctx, key, seq, ttl); err != nil {
		return false, err
	}
	if err := checkKey(key); err != nil {
		return false, err
	}
	var ok bool
	err := d.pool.QueryRow(ctx, d.sql.claim, pgx.QueryExecModeExec, d.ns, key, seq, micros(ttl)).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: claim key %q: %w", ErrDatabase, key, withContext(ctx, err))
	}
	return true, nil
}
