package redislocks

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// restart or SCRIPT FLUSH), so each operation is one round trip in the
// steady state.
var (
	//go:embed acquire.lua
	acquireSource string
	//go:embed release.lua
	releaseSource string
	//go:embed extend.lua
	extendSource string
	//go:embed claim.lua
	claimSource string
	//go:embed claimable.lua
	claimableSource string
	//go:embed acquireclaim.lua
	acquireClaimSource string

	acquireScript = redis.NewScript(acquireSource)
	releaseScript = redis.NewScript(releaseSource)
	extendScript  = redis.NewScript(extendSource)
	claimScript   = redis.NewScript(claimableSource + claimSource)
	// acquireClaimScript is acquire.lua made a function whose parameters
	// shadow KEYS and ARGV, so that its returns return from it.
	acquireClaimScript = redis.NewScript(claimableSource +
		"local function acquire(KEYS, ARGV)\n" + acquireSource + "\nend\n" + acquireClaimSource)
)
