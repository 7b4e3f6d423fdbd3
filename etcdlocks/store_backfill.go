package etcdlocks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/taskstate"
)

// maxRanInTxn bounds the instants that StartBackfill puts in its
// transaction, within etcd's default --max-txn-ops of 128; more are put
// before it, in transactions of as many (an instant known to have run
// stays true whether the backfill then starts or not).
const maxRanInTxn = 100

// ranKey is the key that notes that task's instant at ran.
func (s *Store) ranKey(task string, at time.Time) string {
	return s.taskKey("ran", task) + "/" + fmt.Sprintf("%020d", at.UnixNano())
}

// decodeBackfill decodes kv's backfill; nil kv gives nil.
func decodeBackfill(kv *mvccpb.KeyValue) (*taskstate.Backfill, error) {
	if kv == nil {
		return nil, nil
	}
	var b taskstate.Backfill
	if err := json.Unmarshal(kv.Value, &b); err != nil {
		return nil, storeCorrupt("backfill", string(kv.Key), err)
	}
	return &b, nil
}

// StartBackfill makes b task's running backfill, unless one is running,
// and notes the instants that ran: a Get of the task's backfill key, then
// a transaction that puts it, if unchanged, with a key per instant that
// ran (two round trips; again on a conflict; and one more per
// maxRanInTxn instants beyond the first maxRanInTxn).
func (s *Store) StartBackfill(ctx context.Context, b taskstate.Backfill, ran []time.Time) error {
	if err := taskstate.CheckStartBackfill(ctx, b); err != nil {
		return err
	}
	b.Cursor, b.Taken, b.Refused, b.State = time.Time{}, 0, 0, taskstate.BackfillRunning
	v, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("%w: task %q: backfill %s: %v", taskstate.ErrInvalid, b.Task, b.ID, err)
	}
	seen := map[string]bool{}
	var puts []clientv3.Op
	for _, at := range ran {
		if k := s.ranKey(b.Task, at); !seen[k] {
			seen[k] = true
			puts = append(puts, clientv3.OpPut(k, ""))
		}
	}
	for len(puts) > maxRanInTxn {
		n := len(puts) - maxRanInTxn
		if n > maxRanInTxn {
			n = maxRanInTxn
		}
		if _, err := s.client.Txn(ctx).Then(puts[:n]...).Commit(); err != nil {
			return storeFail("StartBackfill", b.Task, err)
		}
		puts = puts[n:]
	}
	k := s.taskKey("backfills", b.Task)
	for {
		resp, err := s.client.Get(ctx, k)
		if err != nil {
			return storeFail("StartBackfill", b.Task, err)
		}
		kv := firstKV(resp.Kvs)
		p, err := decodeBackfill(kv)
		if err != nil {
			return err
		}
		if p != nil && p.State == taskstate.BackfillRunning {
			if p.ID == b.ID {
				return nil
			}
			return fmt.Errorf("%w: task %q: backfill %s of [%v, %v] is running (%d of %d instants taken)",
				taskstate.ErrBackfillRunning, b.Task, p.ID, p.From, p.To, p.Taken+p.Refused, p.Total)
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{unchangedCmp(k, kv)}, append([]clientv3.Op{clientv3.OpPut(k, string(v))}, puts...))
		if err != nil {
			return storeFail("StartBackfill", b.Task, err)
		}
		if ok {
			return nil
		}
	}
}

// TakeBackfill takes or refuses instant fire of task's backfill id: a read
// of the backfill, of the instant's key and of the task's run keys, then a
// transaction that checks them unchanged and moves the cursor (and, for a
// take, notes the instant and adds the placeholder run): two round trips,
// again on a conflict; a stale call, one.
func (s *Store) TakeBackfill(ctx context.Context, task, id, node string, fire time.Time) (taskstate.BackfillTake, error) {
	if err := taskstate.CheckTakeBackfill(ctx, task, id, node, fire); err != nil {
		return taskstate.BackfillStale, err
	}
	k, rk := s.taskKey("backfills", task), s.ranKey(task, fire)
	reads := s.historyReads(task)
	// The runs with their values: a kept run of the instant refuses it.
	reads[1] = clientv3.OpGet(s.runsPrefix(task), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	for {
		got, err := s.read(ctx, append([]clientv3.Op{clientv3.OpGet(k), clientv3.OpGet(rk, clientv3.WithKeysOnly())}, reads...)...)
		if err != nil {
			return taskstate.BackfillStale, storeFail("TakeBackfill", task, err)
		}
		kv, ran := firstKV(got[0]), firstKV(got[1])
		b, err := decodeBackfill(kv)
		if err != nil {
			return taskstate.BackfillStale, err
		}
		if b == nil || b.ID != id || b.State != taskstate.BackfillRunning || !fire.After(b.Cursor) {
			return taskstate.BackfillStale, nil
		}
		b.Cursor = fire.UTC()
		cmps := []clientv3.Cmp{unchangedCmp(k, kv), unchangedCmp(rk, ran)}
		var ops []clientv3.Op
		answer := taskstate.BackfillRefused
		if !b.Force && (ran != nil || keptRunAt(got[3], fire)) {
			b.Refused++
		} else {
			answer = taskstate.BackfillTaken
			b.Taken++
			e, err := s.newHistoryEdit(task, got[2], got[3])
			if err != nil {
				return taskstate.BackfillStale, err
			}
			if err := e.add(taskstate.BackfillPlaceholder(fire, node), true, ""); err != nil {
				return taskstate.BackfillStale, err
			}
			cmp, eops := e.txn()
			cmps, ops = append(cmps, cmp), append(eops, clientv3.OpPut(rk, ""))
		}
		v, err := json.Marshal(b)
		if err != nil {
			return taskstate.BackfillStale, fmt.Errorf("etcdlocks: task %q: backfill %s: %w", task, id, err)
		}
		ok, err := s.commit(ctx, cmps, append(ops, clientv3.OpPut(k, string(v))))
		if err != nil {
			return taskstate.BackfillStale, storeFail("TakeBackfill", task, err)
		}
		if ok {
			return answer, nil
		}
	}
}

// EndBackfill ends task's running backfill id: a Get of the backfill, then
// a transaction that puts its new state if unchanged (two round trips;
// again on a conflict).
func (s *Store) EndBackfill(ctx context.Context, task, id, state string) (bool, error) {
	if err := taskstate.CheckEndBackfill(ctx, task, id, state); err != nil {
		return false, err
	}
	k := s.taskKey("backfills", task)
	for {
		resp, err := s.client.Get(ctx, k)
		if err != nil {
			return false, storeFail("EndBackfill", task, err)
		}
		kv := firstKV(resp.Kvs)
		b, err := decodeBackfill(kv)
		if err != nil {
			return false, err
		}
		if b == nil || b.ID != id || b.State != taskstate.BackfillRunning {
			return false, nil
		}
		b.State = state
		v, err := json.Marshal(b)
		if err != nil {
			return false, fmt.Errorf("etcdlocks: task %q: backfill %s: %w", task, id, err)
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{unchangedCmp(k, kv)}, []clientv3.Op{clientv3.OpPut(k, string(v))})
		if err != nil {
			return false, storeFail("EndBackfill", task, err)
		}
		if ok {
			return true, nil
		}
	}
}

// keptRunAt reports whether runs (a task's kept runs, read with their
// values) hold a run of instant fire, as taskstate.RanAt says; a value that
// does not decode is none.
func keptRunAt(runs []*mvccpb.KeyValue, fire time.Time) bool {
	for _, kv := range runs {
		var r taskstate.Run
		if json.Unmarshal(kv.Value, &r) == nil && taskstate.RanAt(r, fire) {
			return true
		}
	}
	return false
}
