package pgtest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFaults: a row committed before a SIGKILL survives the restart; a
// paused server answers nothing until resumed.
func TestFaults(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	p := s.Pool()
	if _, err := p.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if _, err := p.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("query on a killed server succeeded")
	}
	s.Restart()
	p.Reset()
	var v int
	if err := p.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: %d, %v; want 42", v, err)
	}
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := p.Exec(short, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("query on a paused server succeeded")
	}
	s.Resume()
	p.Reset()
	if err := p.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}
