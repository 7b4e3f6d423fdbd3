package taskstate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// A store shared by the nodes of a cluster: one node asks for a manual
// run, and exactly one node takes the request.
func Example() {
	ctx := context.Background()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		panic(err)
	}
	_ = store.SetPaused(ctx, "Payroll.Close", taskstate.Pause{Paused: true, Note: "the bank's file is late", By: "cli",
		At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)})
	p, _ := store.Paused(ctx, "Payroll.Close")
	fmt.Printf("paused: %v by %s: %s\n", p.Paused, p.By, p.Note)

	_ = store.RequestRun(ctx, "Payroll.Close", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	at, ok, _ := store.TakeRequest(ctx, "Payroll.Close", "node-a")
	fmt.Println("taken:", ok, at.Format(time.RFC3339))
	_, ok, _ = store.TakeRequest(ctx, "Payroll.Close", "node-a")
	fmt.Println("taken again:", ok)
	// Output:
	// paused: true by cli: the bank's file is late
	// taken: true 2026-03-01T10:00:00Z
	// taken again: false
}
