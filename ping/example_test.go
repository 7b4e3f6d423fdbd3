package ping_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ndigo/ndigo/ping"
)

// A node pings its monitor while it runs; app.Module does the same from
// the configuration's ping section.
func Example() {
	monitor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Println("the monitor hears from the node")
	}))
	defer monitor.Close()

	p, err := ping.New(ping.Config{URL: monitor.URL + "/" + secret, Every: time.Minute, Timeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	if err := p.Start(); err != nil { // pings at once, then every minute
		panic(err)
	}
	for p.Stats().Pings == 0 {
		time.Sleep(time.Millisecond)
	}
	_ = p.Stop(context.Background())
	fmt.Println(ping.Redact(monitor.URL + "/" + secret)[:7])
	// Output:
	// the monitor hears from the node
	// http://
}
