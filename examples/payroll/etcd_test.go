//go:build etcd

package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
)

func init() {
	startEtcd = func(t *testing.T) (string, ledger) {
		c := etcdtest.StartCluster(t, 1)
		return strings.Join(c.Endpoints(), ","), newEtcdLedger(c.Client(), "e2e")
	}
}

// On etcd the stale write is refused by etcdlocks.Guard, in the write's
// transaction. etcd expires the lease in real time, at whole seconds: the
// pause lasts until etcd has deleted the lock key.
func TestEtcdLedgerRejectsStaleHolder(t *testing.T) {
	c := etcdtest.Start(t)
	client := c.Client()
	ns := "ledger-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	d, err := etcdlocks.New(etcdlocks.Options{Client: client, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	staleHolderWriteIsRejected(t, d, newEtcdLedger(client, ns), func(time.Duration) {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := client.Get(context.Background(), "ndigo/"+ns+"/lock/k/payroll-window", clientv3.WithCountOnly())
			if err == nil && resp.Count == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lock key is still in etcd 10s on: %v, %v", resp, err)
			}
		}
	})
	if got, err := newEtcdLedger(client, "other").Entries(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("namespace other: %v, %v; want no entries", got, err)
	}
}
