package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/nodetest"
)

var linOps = flag.Int("lin.ops", 6000, "operations the linearizability check records, at least (make chaos: 100000)")

// TestMain runs a child role when the test binary was re-executed as a node,
// a linearizability worker or a stall holder, and the tests otherwise.
func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
		// go-redis logs every failed dial itself; the tests read the
		// errors from the operations instead.
		redis.SetLogger(quietRedis{})
		goleak.VerifyTestMain(m, goleak.Cleanup(nodetest.RemoveBuilds))
	case roleNode:
		os.Exit(nodeMain())
	case roleLinWorker:
		os.Exit(linWorkerMain())
	case roleStallHolder:
		os.Exit(stallHolderMain())
	default:
		fmt.Fprintf(os.Stderr, "chaos: unknown %s %q\n", roleEnv, role)
		os.Exit(2)
	}
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

const (
	roleEnv       = "CHAOS_ROLE"
	roleNode      = "node"
	roleLinWorker = "linworker"
)
