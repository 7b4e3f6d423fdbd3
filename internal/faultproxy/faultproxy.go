// Package faultproxy is a TCP proxy for the Redis protocol that loses the
// replies of chosen commands after the server ran them, as a connection
// reset between a request and its reply does. Put it between a go-redis
// client and a redis-server to see what a client retry does to a command
// that already took effect.
//
// The proxy reads RESP just enough to find where each command and each
// reply ends. Replies are paired with commands in order; RESP3 push frames
// (pub/sub messages, invalidations) are passed through and paired with
// nothing. When a command matches an armed [Proxy.DropReply], the proxy
// forwards it, waits for the server's reply, discards it and closes both
// sides of that connection: the client sees the connection end without a
// reply (go-redis retries on a new connection), and the command certainly
// ran. Replies to commands the client pipelined after it are lost too.
//
// The package does not depend on testing, so benchmarks and tools can use
// it as well as tests.
package faultproxy

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

// A Command is one command a client sent through the proxy.
type Command struct {
	// Args are the command's name and arguments, as sent.
	Args []string
}

// Name returns the command's name in upper case, or "" for an empty
// command.
func (c Command) Name() string {
	if len(c.Args) == 0 {
		return ""
	}
	return strings.ToUpper(c.Args[0])
}

// A Match chooses commands.
type Match func(Command) bool

// Named matches the commands called name, in any case.
func Named(name string) Match {
	name = strings.ToUpper(name)
	return func(c Command) bool { return c.Name() == name }
}

// Script matches the runs of the Lua script whose SHA1 is sha (hex, any
// case): EVALSHA and EVALSHA_RO naming it, and EVAL and EVAL_RO sending a
// script with that hash.
func Script(sha string) Match {
	sha = strings.ToLower(sha)
	return func(c Command) bool {
		if len(c.Args) < 2 {
			return false
		}
		switch c.Name() {
		case "EVALSHA", "EVALSHA_RO":
			return strings.ToLower(c.Args[1]) == sha
		case "EVAL", "EVAL_RO":
			h := sha1.Sum([]byte(c.Args[1]))
			return hex.EncodeToString(h[:]) == sha
		}
		return false
	}
}

// Arg matches the commands that have an argument, after the name, equal to
// s.
func Arg(s string) Match {
	return func(c Command) bool {
		for _, a := range c.Args[min(1, len(c.Args)):] {
			if a == s {
				return true
			}
		}
		return false
	}
}

// And matches the commands that every one of ms matches.
func And(ms ...Match) Match {
	return func(c Command) bool {
		for _, m := range ms {
			if !m(c) {
				return false
			}
		}
		return true
	}
}

// ErrClosed reports a call on a closed Proxy.
var ErrClosed = errors.New("faultproxy: proxy closed")

// maxBulk bounds the length of one RESP bulk string or aggregate the proxy
// accepts: Redis's own proto-max-bulk-len default.
const maxBulk = 512 << 20

// A Proxy forwards the connections it accepts on a loopback port to an
// upstream Redis. Make one with New; its methods are safe for concurrent
// use.
type Proxy struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup // the accept loop and two goroutines per connection

	mu      sync.Mutex // protects the fields below
	conns   map[*conn]struct{}
	drops   []drop // armed drops, oldest first; each is used once
	log     []Command
	dropped int
	closed  bool
}

// New starts a proxy to the Redis at upstream (host:port) on a free
// loopback port. Each accepted connection dials upstream afresh. Close
// stops it.
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: map[*conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the host:port that clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReply arms one drop: the reply to the next command that m matches is
// lost after the server ran the command, and that connection is closed.
// Each call arms one more drop; drops are used in the order they were armed,
// each by the first command that matches it.
func (p *Proxy) DropReply(m Match) { p.DropReplyThen(m, nil) }

// DropReplyThen arms one drop as [Proxy.DropReply] does, and calls then
// (if not nil) after the reply was lost and before the connection is
// closed: the client is still waiting for the reply, so then runs between
// the command and the client's retry of it, as another client's commands
// may. then must not send through the dropped connection, and must return
// before the client's read timeout (go-redis: 3 s by default).
func (p *Proxy) DropReplyThen(m Match, then func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append(p.drops, drop{m, then})
}

// A drop is an armed DropReplyThen.
type drop struct {
	m    Match
	then func()
}

// Count returns how many commands that m matches the proxy has forwarded,
// retries included. The proxy keeps every command it forwarded for Count,
// so it suits tests and short runs, not long-lived traffic.
func (p *Proxy) Count(m Match) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.log {
		if m(c) {
			n++
		}
	}
	return n
}

// Dropped returns how many replies the proxy has dropped.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Close stops accepting, closes every connection and waits until the
// proxy's goroutines have ended. It returns ErrClosed if it was called
// before.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	err := p.ln.Close()
	for c := range conns {
		c.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &conn{p: p, client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go c.requests()
		go c.replies()
	}
}

// fate decides whether the reply to cmd is dropped (a nil fate keeps it),
// and logs cmd.
func (p *Proxy) fate(cmd Command) *drop {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, cmd)
	for i, d := range p.drops {
		if d.m(cmd) {
			p.drops = append(p.drops[:i], p.drops[i+1:]...)
			return &d
		}
	}
	return nil
}

// conn is one proxied client connection and its upstream connection.
type conn struct {
	p              *Proxy
	client, server net.Conn

	mu    sync.Mutex // protects fates
	fates []*drop    // per command forwarded and not yet answered: its drop, or nil to keep the reply
}

// close closes both sides; the goroutines of c then end.
func (c *conn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}

// end closes c and forgets it.
func (c *conn) end() {
	c.close()
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.p.conns != nil {
		delete(c.p.conns, c)
	}
}

// requests forwards the client's commands upstream, one at a time, each
// after its fate is queued, so that its reply finds the fate.
func (c *conn) requests() {
	defer c.p.wg.Done()
	defer c.end()
	r := bufio.NewReader(c.client)
	for {
		raw, cmd, err := readCommand(r)
		if err != nil {
			return
		}
		drop := c.p.fate(cmd)
		c.mu.Lock()
		c.fates = append(c.fates, drop)
		c.mu.Unlock()
		if _, err := c.server.Write(raw); err != nil {
			return
		}
	}
}

// replies forwards the server's replies to the client, until one whose
// command's reply is to be dropped.
func (c *conn) replies() {
	defer c.p.wg.Done()
	defer c.end()
	r := bufio.NewReader(c.server)
	for {
		raw, push, err := readValue(r, nil)
		if err != nil {
			return
		}
		if !push {
			c.mu.Lock()
			var d *drop
			if len(c.fates) > 0 {
				d, c.fates = c.fates[0], c.fates[1:]
			}
			c.mu.Unlock()
			if d != nil {
				c.p.mu.Lock()
				c.p.dropped++
				c.p.mu.Unlock()
				if d.then != nil {
					d.then()
				}
				return
			}
		}
		if _, err := c.client.Write(raw); err != nil {
			return
		}
	}
}

// readLine reads one CRLF-terminated line and appends it to buf.
func readLine(r *bufio.Reader, buf []byte) ([]byte, []byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return buf, nil, errors.New("faultproxy: RESP line too long")
	}
	if err != nil {
		return buf, nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return buf, nil, fmt.Errorf("faultproxy: RESP line %q does not end in CRLF", line)
	}
	buf = append(buf, line...)
	return buf, line[:len(line)-2], nil
}

// length parses the length after a RESP type byte.
func length(line []byte) (int, error) {
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < -1 || n > maxBulk {
		return 0, fmt.Errorf("faultproxy: bad RESP length in %q", line)
	}
	return n, nil
}

// readCommand reads one command: a RESP array of bulk strings, or an inline
// command (a line of words). It returns the command's raw bytes too.
func readCommand(r *bufio.Reader) ([]byte, Command, error) {
	raw, line, err := readLine(r, nil)
	if err != nil {
		return nil, Command{}, err
	}
	if len(line) == 0 || line[0] != '*' {
		return raw, Command{Args: strings.Fields(string(line))}, nil
	}
	n, err := length(line)
	if err != nil {
		return nil, Command{}, err
	}
	cmd := Command{Args: make([]string, 0, max(n, 0))}
	for range n {
		raw, line, err = readLine(r, raw)
		if err != nil {
			return nil, Command{}, err
		}
		if len(line) == 0 || line[0] != '$' {
			return nil, Command{}, fmt.Errorf("faultproxy: command argument %q is not a bulk string", line)
		}
		size, err := length(line)
		if err != nil || size < 0 {
			return nil, Command{}, fmt.Errorf("faultproxy: bad bulk length in %q", line)
		}
		start := len(raw)
		raw = append(raw, make([]byte, size+2)...)
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return nil, Command{}, err
		}
		cmd.Args = append(cmd.Args, string(raw[start:start+size]))
	}
	return raw, cmd, nil
}

// readValue reads one RESP2 or RESP3 value, appends its raw bytes to buf,
// and reports whether it is a push frame. An attribute is read together
// with the value it annotates.
func readValue(r *bufio.Reader, buf []byte) ([]byte, bool, error) {
	buf, line, err := readLine(r, buf)
	if err != nil {
		return buf, false, err
	}
	if len(line) == 0 {
		return buf, false, errors.New("faultproxy: empty RESP line")
	}
	elems := 0
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return buf, false, nil
	case '$', '!', '=':
		n, err := length(line)
		if err != nil {
			return buf, false, err
		}
		if n < 0 {
			return buf, false, nil // a RESP2 null
		}
		start := len(buf)
		buf = append(buf, make([]byte, n+2)...)
		_, err = io.ReadFull(r, buf[start:])
		return buf, false, err
	case '*', '~', '>':
		if elems, err = length(line); err != nil {
			return buf, false, err
		}
	case '%', '|':
		if elems, err = length(line); err != nil {
			return buf, false, err
		}
		elems *= 2
	default:
		return buf, false, fmt.Errorf("faultproxy: unknown RESP type in %q", line)
	}
	for range elems {
		if buf, _, err = readValue(r, buf); err != nil {
			return buf, false, err
		}
	}
	if line[0] == '|' {
		return readValue(r, buf)
	}
	return buf, line[0] == '>', nil
}
