package locks_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// A node takes the lease, does the work only while it holds it, and releases
// it on the way out. A second node finds the key held and skips.
func Example() {
	ctx := context.Background()
	driver := locks.NewInProcessDriver()

	lease, err := driver.Acquire(ctx, "payroll-window", 30*time.Second)
	if err != nil {
		fmt.Println("cannot lock:", err)
		return
	}
	defer lease.Release(ctx) // never leak the lease on an early return or panic

	// Another holder tries the same key: the contract is non-blocking.
	if _, err := driver.Acquire(ctx, "payroll-window", 30*time.Second); errors.Is(err, locks.ErrNotAcquired) {
		fmt.Println("second holder skips:", err)
	}

	// Code under the lock hands the fencing token to the storage it writes.
	work := locks.NewContext(ctx, lease)
	if l, ok := locks.FromContext(work); ok {
		fmt.Println("writing with a fencing token:", l.Token() > 0)
	}
	// Output:
	// second holder skips: locks: not acquired: key "payroll-window" is held
	// writing with a fencing token: true
}

// Wait waits for a held key within a budget instead of skipping at once.
func ExampleWait() {
	ctx := context.Background()
	driver := locks.NewInProcessDriver()
	holder, _ := driver.Acquire(ctx, "report", time.Minute)

	_, err := locks.Wait(ctx, driver, "report", time.Minute, locks.WaitOptions{Budget: 20 * time.Millisecond, Step: 5 * time.Millisecond})
	fmt.Println(errors.Is(err, locks.ErrNotAcquired))

	_ = holder.Release(ctx)
	lease, err := locks.Wait(ctx, driver, "report", time.Minute, locks.WaitOptions{Budget: time.Second})
	fmt.Println(err, lease.Token() > holder.Token())
	_ = lease.Release(ctx)
	// Output:
	// true
	// <nil> true
}

// AcquireSlot lets up to n holders share a key: a semaphore of n slots,
// each slot a lease with its own fencing token.
func ExampleAcquireSlot() {
	ctx := context.Background()
	driver := locks.NewInProcessDriver()

	a, _ := locks.AcquireSlot(ctx, driver, "exports", 2, time.Minute, nil)
	b, _ := locks.AcquireSlot(ctx, driver, "exports", 2, time.Minute, nil)
	fmt.Println(a.Key(), b.Key())
	if _, err := locks.AcquireSlot(ctx, driver, "exports", 2, time.Minute, nil); errors.Is(err, locks.ErrNotAcquired) {
		fmt.Println(err)
	}

	_ = a.Release(ctx)
	c, _ := locks.AcquireSlot(ctx, driver, "exports", 2, time.Minute, nil)
	fmt.Println(c.Key(), c.Token() > a.Token())

	// With a claim, one fire takes one slot, once.
	fire := &locks.FireClaim{Key: "exports-fire", Seq: 1, TTL: time.Hour}
	_ = b.Release(ctx)
	d, err := locks.AcquireSlot(ctx, driver, "exports", 2, time.Minute, fire)
	fmt.Println(d.Key(), err)
	_ = c.Release(ctx) // a slot is free, but the fire is taken
	_, err = locks.AcquireSlot(ctx, driver, "exports", 2, time.Minute, fire)
	fmt.Println(errors.Is(err, locks.ErrClaimed))
	_ = d.Release(ctx)
	// Output:
	// exports#1 exports#2
	// locks: not acquired: semaphore "exports" of 2 slots: all held
	// exports#1 true
	// exports#2 <nil>
	// true
}
