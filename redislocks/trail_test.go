package redislocks_test

import (
	"context"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
)

// TestStoreTrailNamespacesIsolate: a namespace reads its own trail, with
// its own Seqs, and holds its own Keys; a Key of the trail's own key names
// ("trail:keys") is a Key as any other.
func TestStoreTrailNamespacesIsolate(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	newNS := func(ns string) *redislocks.Store {
		s, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := newNS("trail-a"), newNS("trail-b")
	e := taskstate.Event{Key: "trail:keys", At: time.Unix(1, 0), Action: "run", Target: "Payroll.Close"}
	for _, st := range []*redislocks.Store{a, b, a} {
		if got, err := st.AppendEvent(ctx, e); err != nil || got.Seq != 1 {
			t.Fatalf("AppendEvent of Key %q = %+v, %v; want Seq 1 in each namespace", e.Key, got, err)
		}
	}
	e.Key = "other"
	if got, err := b.AppendEvent(ctx, e); err != nil || got.Seq != 2 {
		t.Fatalf("AppendEvent = %+v, %v; want Seq 2", got, err)
	}
	if got, err := a.Events(ctx, 0, 10); err != nil || len(got) != 1 || got[0].Key != "trail:keys" {
		t.Fatalf("Events of the first namespace = %+v, %v; want its one entry", got, err)
	}
}
