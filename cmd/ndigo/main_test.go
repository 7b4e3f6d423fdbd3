package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/internal/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, backendnode.DialProbe, goleak.Cleanup(nodetest.RemoveBuilds))
}
