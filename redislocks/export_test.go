package redislocks

import "github.com/redis/go-redis/v9"

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
		backfillStartScript, backfillTakeScript, backfillEndScript, memberScript}
)
