package pglocks

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/watchhub"
)

const (
	// silence is how long the listening connection may stay silent before
	// it is replaced, which catches a hung server or a dropped connection
	// nobody reported; every waiter is woken then, in case a release was
	// missed.
	silence = 10 * time.Second
	// retryMin and retryMax bound the pause between attempts to reconnect.
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// channelName returns the notification channel of a lock table: short
// enough for PostgreSQL's 63-byte identifiers whatever the table's name.
func channelName(table string) string {
	sum := sha256.Sum256([]byte(table))
	return "ndigo_released_" + hex.EncodeToString(sum[:8])
}

// payload returns what a release of key in namespace ns notifies: the same
// as the release statement's md5($1 || chr(10) || $2). A namespace holds no
// newline, so no two (ns, key) pairs share the string hashed; the fixed
// length keeps every payload under PostgreSQL's 8000-byte limit.
func payload(ns, key string) string {
	sum := keySum(ns, key)
	return hex.EncodeToString(sum[:])
}

// keySum is the md5 sum of ns, a newline and key: the payload's bytes.
func keySum(ns, key string) [md5.Size]byte {
	return md5.Sum([]byte(ns + "\n" + key))
}

// listener is what keeps a driver's connection LISTENing for releases.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	log     *slog.Logger
	hub     *watchhub.Hub
}

// listen keeps one connection LISTENing on the channel until ctx ends,
// reconnecting after failures and silences.
func (l *listener) listen(ctx context.Context, ready func()) {
	pause := retryMin
	reconnect := false // a connection listened before: releases may have been missed since
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, l.cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize(), pgx.QueryExecModeSimpleProtocol)
		}
		if err != nil {
			if conn != nil {
				closeConn(conn)
			}
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("pglocks: cannot listen for releases; waiters poll", "err", err, "retry_in", pause)
			ready() // waiters poll meanwhile
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, retryMax)
			continue
		}
		pause = retryMin
		if reconnect {
			// A release may have happened while no connection listened.
			l.hub.WakeAll()
		}
		reconnect = true
		ready()
		for {
			wctx, cancel := context.WithTimeout(ctx, silence)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			l.hub.WakeOne(n.Payload)
		}
		closeConn(conn)
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
