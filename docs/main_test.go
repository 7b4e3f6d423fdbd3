package docs_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		nodetest.RemoveBuilds(0)
		if ndigoBuild.dir != "" {
			_ = os.RemoveAll(ndigoBuild.dir)
		}
	}))
}
