package redislocks

// The scripts' SHA1s, for tests that pick one operation's commands out of
// the traffic, and their sources, for tests that load them first.
var (
	AcquireSHA = acquireScript.Hash()
	ExtendSHA  = extendScript.Hash()
	ReleaseSHA = releaseScript.Hash()
	ClaimSHA   = claimScript.Hash()
	TakeSHA    = takeScript.Hash()
	RecordSHA  = recordScript.Hash()
	RequestSHA = requestScript.Hash()
	PauseSHA   = pauseScript.Hash()
	Sources    = []string{acquireSource, extendSource, releaseSource, claimSource, takeSource, recordSource,
		requestSource, pauseSource}
)
