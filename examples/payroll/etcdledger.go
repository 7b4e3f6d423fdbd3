//go:build etcd

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/locks"
)

// etcdLedger is a key range in the etcd cluster that holds the locks,
// shared by every node: each entry is one key, written by etcdlocks.Guard
// in a transaction that compares the lock key with the writer's lease, so
// etcd itself refuses a stale holder's write. Its entries read back in the
// order etcd committed them (their mod revisions).
type etcdLedger struct {
	client *clientv3.Client
	prefix string
}

func init() { etcdStore = fx.Options(etcdlocks.Module, fx.Provide(provideEtcdLedger)) }

func newEtcdLedger(c *clientv3.Client, namespace string) *etcdLedger {
	return &etcdLedger{client: c, prefix: "ndigo-payroll/" + namespace + "/ledger/"}
}

// provideEtcdLedger is the ledger of a node on etcd, on etcdlocks.Module's
// client.
func provideEtcdLedger(c *clientv3.Client, cfg Config) ledger {
	return newEtcdLedger(c, cfg.Etcd.Namespace)
}

func (l *etcdLedger) Append(ctx context.Context, lease locks.Lease, fire time.Time, node string) error {
	e := entry{Fire: fire, Node: node, Token: lease.Token()}
	// One key per lease: a fire run twice would leave two.
	_, err := etcdlocks.Guard(ctx, lease, clientv3.OpPut(l.prefix+strconv.FormatUint(e.Token, 10), e.String()))
	switch {
	case errors.Is(err, locks.ErrLeaseLost):
		return fmt.Errorf("%w: token %d: %w", errStaleToken, e.Token, err)
	case err != nil:
		return fmt.Errorf("payroll: ledger append: %w", err)
	}
	return nil
}

func (l *etcdLedger) Entries(ctx context.Context) ([]entry, error) {
	resp, err := l.client.Get(ctx, l.prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("payroll: ledger entries: %w", err)
	}
	entries := make([]entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		e, err := parseEntry(string(kv.Value))
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}
