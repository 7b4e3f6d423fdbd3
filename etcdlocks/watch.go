package etcdlocks

import (
	"context"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/internal/watchhub"
)

// retryMin and retryMax bound the pause between attempts to watch again.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// watcher keeps a driver's watch of its namespace's lock keys.
type watcher struct {
	client *clientv3.Client
	prefix string // the lock keys' prefix
	log    *slog.Logger
	hub    *watchhub.Hub
}

// listen watches the lock keys until ctx ends, watching again after a
// failure, and wakes the longest-waiting watcher of each key deleted. A
// watch that restarts wakes every watcher, as a deletion may have been
// missed meanwhile.
func (w *watcher) listen(ctx context.Context, ready func()) {
	retry := retryMin
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := w.client.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		for resp := range ch {
			if resp.Created {
				ready()
				retry = retryMin
				continue
			}
			if err := resp.Err(); err != nil {
				w.log.Warn("etcdlocks: lock watch failed; watching again", "err", err)
				break
			}
			for _, ev := range resp.Events {
				if key, ok := strings.CutPrefix(string(ev.Kv.Key), w.prefix); ok {
					w.hub.WakeOne(key)
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		ready() // waiters poll while it is down
		w.hub.WakeAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, retryMax)
	}
}
