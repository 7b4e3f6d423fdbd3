// Package pgfault loses the reply of a chosen PostgreSQL statement after
// the server ran it, as a connection reset between a statement and its
// reply does: what internal/faultproxy does for Redis, for pgx's
// connections. A [Dialer] is set as pgconn.Config.DialFunc; when armed, its
// connection forwards the client's next statement, reads the server's whole
// reply (up to ReadyForQuery: an autocommitted statement has committed by
// then), discards it, calls the armed function, and closes the connection.
// pgx then returns an error: it never resends a query.
//
// The connection reads the protocol only while a loss is armed, and only
// enough to find the statement (a Parse or Query message at the start of a
// write, pgx's "-- ping" aside) and the end of its reply. It expects a
// session without TLS (sslmode=disable), as internal/pgproc's servers have.
//
// The package does not depend on testing, so benchmarks and tools can use
// it as well as tests.
package pgfault

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// ErrLost is what a read of a connection whose reply was lost returns (pgx
// reports its own "conn closed" to the caller).
var ErrLost = errors.New("pgfault: reply lost, connection closed")

// A Dialer makes connections whose replies can be lost. The zero value is
// ready to use; its methods are safe for concurrent use.
type Dialer struct {
	net.Dialer

	mu    sync.Mutex // protects the fields below
	armed []loss     // each armed loss, oldest first
	lost  int
}

// A loss is one armed loss: of the statements to come, skip go through
// before the one whose reply is lost.
type loss struct {
	skip int
	then func()
}

// DialContext dials as net.Dialer does and returns a connection whose
// replies the Dialer can lose. It fits pgconn.Config.DialFunc.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.Dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, d: d}, nil
}

// LoseNextReply arms one loss: the reply to the next statement that a
// connection of d sends is lost after the server ran it, then (if not nil)
// is called, and the connection is closed. Each call arms one more loss,
// used in the order they were armed. then runs on the goroutine reading the
// reply (pgx's caller of the statement) and must not use that connection.
func (d *Dialer) LoseNextReply(then func()) { d.LoseNthReply(1, then) }

// LoseNthReply arms one loss as LoseNextReply does, of the n-th statement
// (n >= 1) that connections of d send once the losses armed before it were
// used: the n-1 before it go through.
func (d *Dialer) LoseNthReply(n int, then func()) {
	if then == nil {
		then = func() {}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed = append(d.armed, loss{skip: max(n-1, 0), then: then})
}

// Lost returns how many replies d has lost.
func (d *Dialer) Lost() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}

// take returns the oldest armed loss, if any and if the statement about to
// be sent is the one it loses, and counts it as lost.
func (d *Dialer) take() (func(), bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.armed) == 0 {
		return nil, false
	}
	if d.armed[0].skip > 0 {
		d.armed[0].skip--
		return nil, false
	}
	then := d.armed[0].then
	d.armed = d.armed[1:]
	d.lost++
	return then, true
}

// conn is one connection of a Dialer.
type conn struct {
	net.Conn
	d *Dialer

	mu   sync.Mutex // protects then
	then func()     // set once the statement whose reply is lost was sent
}

// Write forwards b, and marks the connection as losing the reply when b
// starts a statement and a loss is armed.
func (c *conn) Write(b []byte) (int, error) {
	if statement(b) {
		c.mu.Lock()
		if c.then == nil {
			if then, ok := c.d.take(); ok {
				c.then = then
			}
		}
		c.mu.Unlock()
	}
	return c.Conn.Write(b)
}

// Read reads as the connection does, or, once a statement whose reply is
// lost was sent, reads that reply to its end, discards it, calls then and
// closes the connection.
func (c *conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	then := c.then
	c.mu.Unlock()
	if then != nil {
		return c.lose(c.Conn, then)
	}
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	then = c.then
	c.mu.Unlock()
	if then == nil || n == 0 {
		return n, err
	}
	// A read that began before the statement was sent (pgx's background
	// reader, started by a slow write, keeps one waiting) got the start of
	// the reply to lose: the previous reply had been read to its end.
	return c.lose(io.MultiReader(bytes.NewReader(b[:n]), c.Conn), then)
}

// lose reads the reply to lose from r to its end, discards it, calls then
// and closes the connection.
func (c *conn) lose(r io.Reader, then func()) (int, error) {
	err := skipReply(bufio.NewReader(r))
	if err == nil {
		then()
	}
	_ = c.Conn.Close()
	if err != nil {
		return 0, fmt.Errorf("pgfault: reading the reply to lose: %w", err)
	}
	return 0, ErrLost
}

// statement reports whether b starts a statement's messages: a Parse
// (extended protocol) or a simple Query other than pgx's ping.
func statement(b []byte) bool {
	if len(b) < 5 {
		return false
	}
	switch b[0] {
	case 'P':
		return true
	case 'Q':
		return !bytes.HasPrefix(b[5:], []byte("-- ping"))
	}
	return false
}

// skipReply reads the server's messages up to and including the next
// ReadyForQuery.
func skipReply(r *bufio.Reader) error {
	var head [5]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return fmt.Errorf("pgfault: bad message length %d", n+4)
		}
		if _, err := io.CopyN(io.Discard, r, n); err != nil {
			return err
		}
		if head[0] == 'Z' {
			return nil
		}
	}
}
