package backendnode_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/backendnode"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, backendnode.DialProbe) }
