package etcdlocks

import (
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/taskstate"
)

// trailOps bounds the deletes of one transaction of the trail's trim,
// within etcd's default --max-txn-ops (128).
const trailOps = 100

// eventsPrefix is the prefix of the trail's entries.
func (s *Store) eventsPrefix() string { return s.prefix + "events/" }

// AppendEvent appends e to the namespace's trail: one transaction that
// puts the entry's key (events/<Key>) if it does not exist, counting the
// trail's entries, or else gets it. An entry's Seq is its key's create
// revision: etcd numbers its revisions in the order they commit, so that a
// reader of the trail never sees an entry appear below a Seq it read. The
// etcd client does not resend it: a call whose reply was lost returns an
// error, and stored the entry once or not at all; sent again with the same
// Key, it answers the entry stored. Past the trail's length, the append
// then deletes the oldest entries of the trail as it was at its own
// revision (a Get at that revision, then transactions of deletes): a node
// that trims later deletes the same and older ones, so that racing
// appenders never drop an entry among the newest; a trim that fails is
// left to the next append (the entry is stored, and the call answers it).
func (s *Store) AppendEvent(ctx context.Context, e taskstate.Event) (taskstate.Event, error) {
	if err := taskstate.CheckEvent(ctx, e); err != nil {
		return taskstate.Event{}, err
	}
	e = taskstate.StoredEvent(e, 0)
	b, err := json.Marshal(e)
	if err != nil {
		return taskstate.Event{}, fmt.Errorf("etcdlocks: event %q: %w", e.Key, err)
	}
	k := s.taskKey("events", e.Key)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(b)), clientv3.OpGet(s.eventsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return taskstate.Event{}, eventFail("AppendEvent", e.Key, err)
	}
	if !resp.Succeeded {
		kv := firstKV(resp.Responses[0].GetResponseRange().GetKvs())
		if kv == nil {
			return taskstate.Event{}, fmt.Errorf("%w: AppendEvent of event %q: its key was deleted between the compare and the get", ErrEtcd, e.Key)
		}
		return decodeEvent(kv)
	}
	rev := resp.Header.Revision
	if over := resp.Responses[1].GetResponseRange().Count - int64(s.keep); over > 0 {
		// The entry is stored: a trim that fails (the context ended, the
		// revision compacted) is left to the next append, which counts
		// what this one left.
		_ = s.trimTrail(ctx, rev, over)
	}
	e.Seq = rev
	return e, nil
}

// trimTrail deletes the oldest over entries of the trail as it was at
// revision rev.
func (s *Store) trimTrail(ctx context.Context, rev, over int64) error {
	resp, err := s.client.Get(ctx, s.eventsPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(over))
	if err != nil {
		return err
	}
	for kvs := resp.Kvs; len(kvs) > 0; {
		n := min(len(kvs), trailOps)
		ops := make([]clientv3.Op, n)
		for i, kv := range kvs[:n] {
			ops[i] = clientv3.OpDelete(string(kv.Key))
		}
		if _, err := s.client.Txn(ctx).Then(ops...).Commit(); err != nil {
			return err
		}
		kvs = kvs[n:]
	}
	return nil
}

// Events reads the trail's entries of Seq above after: one Get of the
// prefix from that create revision, sorted by it, limited (etcd reads the
// whole prefix to sort it: as many entries as the trail keeps).
func (s *Store) Events(ctx context.Context, after int64, limit int) ([]taskstate.Event, error) {
	if err := taskstate.CheckEvents(ctx, after, limit); err != nil {
		return nil, err
	}
	resp, err := s.client.Get(ctx, s.eventsPrefix(), clientv3.WithPrefix(), clientv3.WithMinCreateRev(after+1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("%w: Events in namespace %q: %w", ErrEtcd, s.ns, err)
	}
	var out []taskstate.Event
	for _, kv := range resp.Kvs {
		e, err := decodeEvent(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// decodeEvent decodes the trail's entry kv, its Seq its create revision.
func decodeEvent(kv *mvccpb.KeyValue) (taskstate.Event, error) {
	var e taskstate.Event
	if err := json.Unmarshal(kv.Value, &e); err != nil {
		return e, storeCorrupt("event", string(kv.Key), err)
	}
	return taskstate.StoredEvent(e, kv.CreateRevision), nil
}

// eventFail wraps an etcd error with ErrEtcd and the event's Key.
func eventFail(op, key string, err error) error {
	return fmt.Errorf("%w: %s of event %q: %w", ErrEtcd, op, key, err)
}
