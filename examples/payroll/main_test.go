package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/internal/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { nodetest.RemoveBuilds(0); etcdtest.StopShared() }))
}
