package etcdproc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/ndigo/ndigo/internal/etcdproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartStop: a member answers in the directory given, keeps its data
// across Kill and Restart, and Stop leaves no process and keeps a directory
// it did not make; one it made, it removes.
func TestStartStop(t *testing.T) {
	if _, err := etcdproc.LookPath(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c, err := etcdproc.StartCluster(etcdproc.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	m := c.Members()[0]
	if m.Name() != "m0" || m.ID() == 0 || c.Endpoints()[0] != m.Endpoint() || m.Endpoint() != "http://"+m.Addr() {
		t.Fatalf("member %s, ID %x, endpoint %s, endpoints %v", m.Name(), m.ID(), m.Endpoint(), c.Endpoints())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(); err == nil {
		t.Fatal("Kill of a killed member succeeded")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get after Restart = %v, %v; want v", resp, err)
	}
	if l, err := c.Leader(ctx); err != nil || l != m {
		t.Fatalf("Leader = %v, %v; want m0", l, err)
	}
	c.Stop()
	if running, _ := m.State(); running {
		t.Fatal("member running after Stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "m0", "etcd.log")); err != nil {
		t.Fatalf("the directory given: %v; want it kept", err)
	}

	own, err := etcdproc.StartCluster(etcdproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	made := filepath.Dir(filepath.Dir(own.Members()[0].LogPath()))
	own.Stop()
	own.Stop()
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Fatalf("the directory StartCluster made, %s: %v after Stop; want it removed", made, err)
	}
}

// TestStartClusterErrors: a negative member count is refused.
func TestStartClusterErrors(t *testing.T) {
	if _, err := etcdproc.StartCluster(etcdproc.Options{Members: -1}); err == nil {
		t.Fatal("StartCluster with -1 members succeeded")
	}
}
