package etcdlocks

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/taskstate"
)

// scheduleKey is the key of the stored schedule of name: the name as it
// is (at most taskstate.MaxScheduleNameLen bytes), so that the keys' order
// is the names'.
func (s *Store) scheduleKey(name string) string { return s.prefix + "schedule/" + name }

// failSchedule wraps an etcd error with ErrEtcd and the schedule's name.
func failSchedule(op, name string, err error) error {
	return fmt.Errorf("%w: %s of schedule %q: %w", ErrEtcd, op, name, err)
}

// CreateSchedule stores sc unless a schedule of its name is stored: one
// transaction that puts it, and rewrites the schedules' generation key, if
// its key does not exist.
func (s *Store) CreateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	if err := taskstate.CheckContext(ctx); err != nil {
		return err
	}
	b, err := taskstate.EncodeSchedule(sc)
	if err != nil {
		return err
	}
	k := s.scheduleKey(sc.Name)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(b)), clientv3.OpPut(s.schedulesKey(), "")).Commit()
	if err != nil {
		return failSchedule("CreateSchedule", sc.Name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %q", taskstate.ErrScheduleExists, sc.Name)
	}
	return nil
}

// UpdateSchedule replaces the stored schedule of sc's name: one
// transaction that puts it, and rewrites the generation key, if its key
// holds other bytes (a missing key fails the compare too), and otherwise
// counts the key, to tell an absent schedule from an unchanged one.
func (s *Store) UpdateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	if err := taskstate.CheckContext(ctx); err != nil {
		return err
	}
	b, err := taskstate.EncodeSchedule(sc)
	if err != nil {
		return err
	}
	k := s.scheduleKey(sc.Name)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.Value(k), "!=", string(b))).
		Then(clientv3.OpPut(k, string(b)), clientv3.OpPut(s.schedulesKey(), "")).
		Else(clientv3.OpGet(k, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return failSchedule("UpdateSchedule", sc.Name, err)
	}
	if !resp.Succeeded && resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return fmt.Errorf("%w: %q", taskstate.ErrNoSchedule, sc.Name)
	}
	return nil
}

// DeleteSchedule removes the stored schedule of name: one transaction that
// deletes it, and rewrites the generation key, if its key exists.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := taskstate.CheckScheduleName(ctx, name); err != nil {
		return false, err
	}
	k := s.scheduleKey(name)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpDelete(k), clientv3.OpPut(s.schedulesKey(), "")).Commit()
	if err != nil {
		return false, failSchedule("DeleteSchedule", name, err)
	}
	return resp.Succeeded, nil
}

// Schedules returns the stored schedules, ordered by name: one prefix Get,
// which etcd answers in key order.
func (s *Store) Schedules(ctx context.Context) ([]taskstate.Schedule, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return nil, err
	}
	resp, err := s.client.Get(ctx, s.prefix+"schedule/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("%w: Schedules in namespace %q: %w", ErrEtcd, s.ns, err)
	}
	out := make([]taskstate.Schedule, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		sc, err := taskstate.DecodeSchedule(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%w (key %q)", err, kv.Key)
		}
		out = append(out, sc)
	}
	return out, nil
}
