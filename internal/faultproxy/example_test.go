package faultproxy_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/faultproxy"
)

// A client behind the proxy loses the reply of its first INCR after Redis
// ran it. go-redis retries on a new connection, so the counter goes up
// twice for one call: INCR is not idempotent under retries.
func Example() {
	p, err := faultproxy.New("127.0.0.1:6379")
	if err != nil {
		panic(err)
	}
	defer p.Close()
	c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // default retries
	defer c.Close()

	p.DropReply(faultproxy.And(faultproxy.Named("INCR"), faultproxy.Arg("visits")))
	n, err := c.Incr(context.Background(), "visits").Result()
	fmt.Println(n, err, p.Count(faultproxy.Named("INCR")), p.Dropped())
}
