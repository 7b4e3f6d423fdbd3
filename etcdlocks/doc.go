// Package etcdlocks is a locks.Driver on etcd: leases that a quorum of etcd
// members agreed to, so that a lease survives the loss of any minority of
// members, with fencing tokens that etcd itself orders.
//
// # Operations
//
// Acquire grants an etcd lease of the TTL (etcd counts whole seconds, so it
// is rounded up) and, in a transaction, puts the lock key on it if the key
// does not exist: two round trips, and a third that revokes the unused
// lease when the key is held. Release revokes the etcd lease, which deletes
// the key in the same step: one round trip. Extend keeps the etcd lease
// alive (one round trip) when the new TTL fits in its whole seconds, and
// otherwise moves the key to a new etcd lease in a transaction that checks
// the key is still this acquisition's (its create revision and holder ID)
// and unchanged since it last wrote it (its mod revision); a Release waits
// for an Extend of the same lease to end, so that it revokes the lease the
// key is on. Claim (locks.Claimer) puts the claim key on the driver's claim
// lease of the claim's TTL, kept alive by the call (one round trip), in one
// nested transaction that creates the claim key or replaces a lower claim:
// the sequence numbers are zero-padded, so etcd's byte comparison orders
// them as numbers. AcquireClaims (locks.ClaimAcquirer: how the scheduler
// takes the locked fires due at one instant) grants each fire's lease and
// keeps the claim leases alive at once (one round trip of wall time, a
// Grant each and one call per claim TTL) and takes up to 16 fires' keys and
// claims in one transaction of nested ones; the leases a fire did not use
// are revoked after. Heartbeat (locks.Membership) keeps the member's etcd
// lease alive and reads the group's keys: two round trips.
//
// One etcd lease per acquisition, rather than one per driver kept alive in
// the background: a lease must end at its own TTL when its holder stops
// extending it (a run that outlives its lease without Renew), which a
// driver-wide lease kept alive by a live process would not do.
//
// Claims share one etcd lease per driver and claim TTL, which each claim
// keeps alive to its full TTL before it writes: a claim record lives at
// least its TTL from about its claim, and at most its TTL past the last
// claim of that TTL by the driver that claimed it last (a record that
// expires later only refuses more). A lease per
// claim would leave the previous claim's lease alive and empty for the
// claim's TTL: a day's worth of leases for a task that fires every second.
// The live leases are thus one per acquisition held, one per member and
// one per driver and claim TTL.
//
// The driver chooses each etcd lease's ID (at random, 63 bits): clientv3
// resends a grant whose reply it did not get, and the resend finds the
// lease its first attempt granted ("lease already exists") instead of
// granting another that nobody knows; a grant that fails is revoked, as
// nothing is on it yet. A heartbeat whose put was lost puts the member's
// key on the same lease at the next heartbeat, and Leave revokes the
// member's lease after a failed delete too. So a lost reply leaves no
// lease alive without a key, but a claim lease whose claims another
// driver's replaced (the lockstest LostReply cases check it).
//
// # Key layout
//
// For namespace ns every key starts with "ndigo/ns/": "lock/k/<key>" (the
// holder's ID, on the acquisition's etcd lease), "claim/k/<key>" (the
// latest claimed sequence number, on a claim lease of the claim's TTL) and
// "members/<len>:<group>/<member>" (on the member's lease). A key longer
// than 512 bytes appears as "h/" and its SHA-256 in hex instead of "k/" and
// itself, so that a transaction naming it stays within etcd's request limit
// up to locks.MaxKeyLen. No namespace's keys are another's.
//
// # Fencing tokens
//
// A lease's token is the revision at which its lock key was created. etcd
// revisions are cluster-wide, never reused and increase with every write
// the quorum commits, whatever member leads: a later acquisition of a key
// always has a greater token, across leader changes, member restarts and
// the whole cluster's restart (the revision is persisted).
//
// # Local expiry
//
// A lease's Done channel closes at a local monotonic deadline: the time the
// Acquire (or the last successful Extend) was sent plus the TTL, less a
// drift margin (Options.DriftRatio of the TTL plus Options.MinDrift, by
// default 1% plus 2ms). etcd's lease starts when the leader grants it,
// after the request was sent, and lasts at least the TTL (rounded up to a
// second, and to etcd's minimum lease TTL, about 1.5 election timeouts), so
// a holder that stops when Done closes stops before etcd could give the key
// to another node. The rounding only keeps a key held longer than its
// holder counts on: a released key is free at once, an abandoned one
// within its etcd lease.
//
// # Waiting
//
// The driver implements locks.Watcher: one etcd watch of the namespace's
// lock keys per driver, running while someone waits (and a moment after),
// wakes one local waiter per deleted key; a watch that restarts wakes them
// all.
//
// # Guarded writes
//
// [Guard] commits a holder's own writes to etcd in one transaction that
// compares the lock key's create revision with the lease's token and its
// value with the holder's ID: a stale holder's writes are refused by etcd,
// not only by its own clock.
//
// # Store
//
// Store is a taskstate.Store on the same etcd. For namespace ns its keys
// start with "ndigo/ns/state/", apart from the driver's "lock/", "claim/"
// and "members/". With <t> a task's name as the lock keys write it ("k/"
// and the name, or "h/" and its SHA-256 past 512 bytes) after its length
// and a colon, so that no task's keys are a prefix of another's:
//
//	paused/<t>       while the task is paused: its taskstate.Pause, JSON ("1" if paused by a version before notes)
//	resumed/<t>      the task's last resume with a note, by or at, while it is not paused: its taskstate.Pause, JSON
//	pauses           rewritten by every SetPaused: its mod revision is Poll.Pauses
//	requests/<t>     the pending manual-run request: JSON {task, at}
//	retries/<t>      the task's last retry or waiting fire, pending or taken (JSON; "taken" once taken)
//	backfills/<t>    the task's last backfill, as taskstate.Backfill's JSON
//	runcounts/<t>    the runs the task took (TakeRun): JSON {task, taken, takes}, takes its last
//	                 taskstate.MaxRunTakes takes, oldest first, each {fire (Unix nanoseconds), n}
//	ran/<t>/<n>      an instant known to have run, in Unix nanoseconds zero-padded to 20 digits
//	seq/<t>          the number of the task's last run, rewritten by every change of its runs
//	runs/<t>/<seq>   a kept run, as taskstate.Run's JSON, seq zero-padded to 20 digits; a
//	                 placeholder's key ends in "/" and a digest of its fire, manual flag,
//	                 attempt, backfill flag and node, so that a record finds the
//	                 placeholder it replaces among the keys alone; a run recorded with
//	                 an ID (taskstate.TaskRun.ID) ends in "/id-" and a digest of the ID,
//	                 so that a record sent again finds the run among the keys alone
//	schedule/<name>  a stored schedule, as taskstate.EncodeSchedule encodes it
//	schedules        rewritten by each schedule call that changes them: its mod revision is Poll.Schedules
//	events/<k>       an entry of the trail of control actions, <k> its Key written as <t>: taskstate.Event's
//	                 JSON; its create revision is its Seq; the newest StoreOptions.Trail are kept
//
// AppendEvent is one transaction that puts the entry's key if it does not
// exist (a Key held answers its entry) and counts the trail's entries, and,
// past the trail's length, a Get of the oldest at the append's revision
// and a transaction of their deletes; Events is one Get of the prefix from
// a create revision, sorted by it (etcd reads the whole prefix to sort
// it). etcd numbers revisions in the order transactions commit, so that
// the Seqs of the trail are in commit order.
//
// A call whose outcome compares decide is one transaction, one round trip:
// SetPaused (the flag, the last resume and the pause generation's key),
// RequestRun (put if absent), CreateSchedule (put if absent),
// UpdateSchedule (put if the bytes differ, else count the key) and
// DeleteSchedule (delete if present, with the generation's key); Paused is
// one transaction of two Gets (the flag and the last resume); Runs and
// Schedules are one Get, Runs sorted by key descending and limited to the
// runs it returns; Poll is one transaction of four prefix Gets (requests,
// retries, backfills, runcounts) and the two generations' keys. The others
// read what they change in one transaction of Gets and then commit a
// transaction whose compares check that the mod revisions they read are
// unchanged, both again on a conflict: two round trips for TakeRequest,
// TakeRetry, LeaveWaiting, TakeRun, Record (of any number of runs),
// StartBackfill, TakeBackfill and EndBackfill, and one when the read
// decides (nothing pending, a stale instant, a backfill already running, a
// fire among the last takes, the runs all taken). A change of a task's runs
// rewrites its sequence key, whose compare stands for them all, trims the
// runs past the history length with one range delete, and is in the same
// transaction as the request, retry or backfill it goes with. A Record
// that could exceed etcd's default --max-txn-ops (128) is recorded in
// several transactions of whole tasks, and a StartBackfill of more than
// 100 instants that ran notes the extra ones first, in transactions of
// 100.
//
// etcd keeps these keys until they change: the runs of a task no longer
// declared, its run counts, and the instants known to have run, do not
// expire.
//
// The etcd client never resends a mutating call once sent: a call whose
// reply is lost returns an error wrapping ErrEtcd, and the state is as if
// it ran once or not at all (taskstatetest.Failed), but for a Record split
// across transactions, some of whose tasks may then be recorded, each
// whole: sent again with the same run IDs (as the scheduler's recorder
// does), it adds the runs not kept yet and keeps each run once.
//
// # Retries
//
// The etcd client resends a mutating call only when it knows the request
// was not sent, so no call runs twice. A call whose reply is lost (or whose
// context ends after the commit) returns an error wrapping ErrEtcd, and
// revokes no lease the call may have put a key on, but for the lock
// leases of an acquisition, whose keys are to be free:
//
//   - Acquire and AcquireClaims revoke the lock leases they granted, so
//     that the key is free again whether the transaction ran or not (one
//     that commits after the revoke finds no lease and fails); a claim
//     the transaction may have recorded stays, on the claim lease, which
//     is never revoked: an unknown claim counts as made, and a fire is
//     lost rather than run twice.
//   - An Extend whose move is lost settles it in one more round trip:
//     while the key is still on its old lease, a transaction puts it
//     there again, which changes its mod revision so that the move can no
//     longer commit; otherwise it reads the key. The lease the key is not
//     on is then revoked, and the Extend succeeds if the move committed.
//     When that round trip fails too, the next Extend or Release settles
//     first.
//   - A Heartbeat whose put is lost leaves its new lease to expire: the
//     put may have moved the member's key onto it.
package etcdlocks
