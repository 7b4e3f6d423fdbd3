package redislocks_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// A nightly job runs on one node of the cluster: every node shares one Redis
// and one namespace per environment. (This example needs a Redis server, so
// it is compiled but not run.)
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close() // the driver borrows the client and never closes it

	d, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod"})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close() // stops the shared release subscription, if any

	// Wait up to 5s for another node to finish; the release wakes us.
	lease, err := locks.Wait(ctx, d, "payroll-window", time.Minute, locks.WaitOptions{Budget: 5 * time.Second})
	if errors.Is(err, locks.ErrNotAcquired) {
		log.Print("payroll-window is held by another node; skipping")
		return
	}
	if err != nil {
		log.Fatal(err) // Redis failed: wraps redislocks.ErrRedis
	}
	defer lease.Release(ctx)

	// Work under a context that ends when the lease may be lost, and hand
	// the fencing token to the storage we write.
	work, cancel := locks.WithLease(ctx, lease)
	defer cancel()
	closeBooks(work, lease.Token())
}

func closeBooks(ctx context.Context, fencingToken uint64) {}

// Behind Sentinel, a lease that a failover could lose is refused: the driver
// grants it only once a replica has it. (This example needs a Sentinel
// setup, so it is compiled but not run.)
func ExampleOptions_minReplicas() {
	ctx := context.Background()
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	d, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod", MinReplicas: 1, MinReplicasTimeout: 500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	lease, err := d.Acquire(ctx, "payroll-window", time.Minute)
	switch {
	case errors.Is(err, redislocks.ErrNotReplicated):
		log.Print("no replica acknowledged in time; the lease was given back")
		return
	case err != nil:
		log.Print(err) // held by another node, or Redis failed
		return
	}
	defer lease.Release(ctx)
	closeBooks(ctx, lease.Token())
}
