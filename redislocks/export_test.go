package redislocks

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts' SHA1s, for tests that pick one operation's commands out of
// the traffic, and the scripts, for tests that load them first.
var (
	AcquireSHA      = acquireScript.Hash()
	AcquireClaimSHA = acquireClaimScript.Hash()
	ExtendSHA       = extendScript.Hash()
	ReleaseSHA      = releaseScript.Hash()
	ClaimSHA        = claimScript.Hash()
	TakeSHA         = takeScript.Hash()
	RecordSHA       = recordScript.Hash()
	RequestSHA      = requestScript.Hash()
	PauseSHA        = pauseScript.Hash()
	ScheduleSHA     = scheduleScript.Hash()
	Scripts         = []*redis.Script{acquireScript, acquireClaimScript, extendScript, releaseScript, claimScript,
		takeScript, recordScript, requestScript, pauseScript, scheduleScript, leaveWaitingScript, takeRetryScript,
		backfillStartScript, backfillTakeScript, backfillEndScript, memberScript, takeRunScript, trailScript}
)

// LongHandoff makes handoff reservations last a minute until t ends, so
// that a test's steps between a release and the waiter's take hold on a
// loaded machine (they last 10ms otherwise).
func LongHandoff(t testing.TB) {
	old := handoffTTL
	handoffTTL = time.Minute
	t.Cleanup(func() { handoffTTL = old })
}
