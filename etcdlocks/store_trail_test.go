package etcdlocks_test

import (
	"context"
	"testing"
	"time"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/taskstate"
)

// TestStoreTrailNamespacesIsolate: a namespace reads its own trail and
// holds its own Keys.
func TestStoreTrailNamespacesIsolate(t *testing.T) {
	c := etcdtest.Start(t).Client()
	ctx := context.Background()
	a, b := newStore(t, c, storeNamespace(), 0), newStore(t, c, storeNamespace(), 0)
	e := taskstate.Event{Key: "same", At: time.Unix(1, 0), Action: "run", Target: "Payroll.Close"}
	seqs := map[*etcdlocks.Store]int64{}
	for _, st := range []*etcdlocks.Store{a, b, a, b} {
		got, err := st.AppendEvent(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if seq, ok := seqs[st]; ok && got.Seq != seq {
			t.Fatalf("AppendEvent of Key %q again = Seq %d; want %d, the namespace's entry", e.Key, got.Seq, seq)
		}
		seqs[st] = got.Seq
	}
	if seqs[a] == seqs[b] {
		t.Fatalf("both namespaces answered Seq %d: one entry", seqs[a])
	}
	for _, st := range []*etcdlocks.Store{a, b} {
		if got, err := st.Events(ctx, 0, 10); err != nil || len(got) != 1 || got[0].Seq != seqs[st] {
			t.Fatalf("Events = %+v, %v; want the namespace's one entry, Seq %d", got, err, seqs[st])
		}
	}
}
