package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/redisnode"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, redisnode.DialProbe)
}
