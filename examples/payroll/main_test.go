package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/nodetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(nodetest.RemoveBuilds)) }
