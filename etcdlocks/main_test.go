package etcdlocks_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/etcdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { etcdtest.StopShared() }))
}
