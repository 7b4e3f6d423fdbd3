package redislocks

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/watchhub"
)

const (
	// healthEvery is how long the subscription may stay silent before it
	// is pinged; a second silent period replaces its connection, which
	// catches a hung server or a dropped connection nobody reported.
	healthEvery = 3 * time.Second
	// retryMin and retryMax bound the pause between attempts to reconnect.
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// subscriber keeps a driver's release subscription: a pattern
// subscription to every channel of its namespace.
type subscriber struct {
	client Client
	prefix string // channel prefix; the pattern is prefix + "*"
	log    *slog.Logger
	hub    *watchhub.Hub
}

// listen keeps the subscription until ctx ends, reconnecting after
// failures and silences, and wakes the longest-waiting watcher of each key
// whose release is published.
func (s *subscriber) listen(ctx context.Context, ready func()) {
	var mu sync.Mutex    // protects ps
	var ps *redis.PubSub // the current connection; replaced when it goes silent
	// connect replaces the connection; it returns nil once ctx has ended.
	connect := func() *redis.PubSub {
		mu.Lock()
		defer mu.Unlock()
		if ps != nil {
			_ = ps.Close()
			ps = nil
		}
		if ctx.Err() != nil {
			return nil
		}
		// PSubscribe only writes the command; the confirmation arrives
		// through Receive.
		ps = s.client.PSubscribe(ctx, s.prefix+"*")
		return ps
	}
	closePS := func() {
		mu.Lock()
		defer mu.Unlock()
		if ps != nil {
			_ = ps.Close() // unblocks a Receive in progress
		}
	}
	defer context.AfterFunc(ctx, closePS)()
	defer closePS()
	cur := connect()
	confirmed := false // Redis confirmed the current subscription
	everConfirmed := false
	pinged := false // a silent period passed and a PING is out
	retry := retryMin
	for cur != nil {
		msg, err := cur.ReceiveTimeout(ctx, healthEvery)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && confirmed {
				pinged = true
				_ = cur.Ping(ctx)
				continue
			}
			if confirmed || !everConfirmed && retry == retryMin {
				s.log.Warn("redislocks: release subscription lost; waiters poll until it is back", "pattern", s.prefix+"*", "err", err)
			}
			confirmed, pinged = false, false
			if !everConfirmed {
				ready()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(2*retry, retryMax)
			cur = connect()
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "psubscribe" {
				continue
			}
			if everConfirmed {
				s.log.Info("redislocks: release subscription restored", "pattern", s.prefix+"*")
				s.hub.WakeAll()
			}
			confirmed, everConfirmed = true, true
			retry = retryMin
			ready()
		case *redis.Message:
			s.hub.WakeOne(strings.TrimPrefix(m.Channel, s.prefix))
		}
	}
}
