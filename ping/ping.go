// Package ping tells a monitor outside the cluster that a node is
// scheduling: while its scheduler runs, each node sends a GET to one URL
// every period, healthchecks-style (healthchecks.io, Uptime Kuma's push
// monitors, Cronitor's heartbeats), so that the monitor raises its alarm
// when every node has stopped, crashed or lost its network, which no metric
// of the cluster's own can report.
//
// A ping is a plain GET with no body; a 2xx answer is a success, anything
// else (another status, a refused connection, no answer within the
// timeout) a failure, which is logged and counted ([Pinger.Stats]) and does
// not stop the pings. Nothing is appended to the URL (no /start or /fail):
// the monitor judges by silence alone.
//
// The URL is a secret: a healthchecks URL holds the check's UUID, and
// anyone who has it can ping in the cluster's place. Logs and errors show
// only its scheme and host ([Redact]).
//
// The package is independent of fx and of the scheduler: [New] and
// [Pinger.Start] and [Pinger.Stop] are all there is. app.Module builds a
// Pinger from the configuration's ping section and starts it after the
// scheduler, stopping it before.
package ping

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Defaults of [Config].
const (
	DefaultEvery   = time.Minute
	DefaultTimeout = 10 * time.Second
)

// ErrTimeout is the cause of a ping that had no answer within
// [Config.Timeout].
var ErrTimeout = errors.New("ping: no answer within the timeout")

// Config configures a [Pinger]. URL is required; the rest is optional.
type Config struct {
	// URL is pinged with GET: http or https (see [CheckURL]).
	URL string
	// Every is the period between the starts of two pings; zero means
	// DefaultEvery. The first ping is sent at Start. A ping that takes
	// longer than Every delays the next one rather than overlapping it.
	Every time.Duration
	// Timeout bounds each ping, on Clock; zero means DefaultTimeout.
	Timeout time.Duration
	// Clock paces the pings and their timeouts; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives a line per failed ping; nil means slog.Default().
	Logger *slog.Logger
	// Client sends the pings; nil means a client of the Pinger's own,
	// whose idle connections Stop closes. A client given here is the
	// caller's to close.
	Client *http.Client
	// Node, if set, names the node in the User-Agent header of each ping,
	// "ndigo-ping (node NAME)", which some monitors show.
	Node string
}

// Stats are what a Pinger has done since it was built.
type Stats struct {
	Pings       uint64    // pings sent, whatever their outcome
	Failures    uint64    // pings that failed
	LastSuccess time.Time // when the last successful ping was answered, by the Pinger's clock; zero until one was
}

// A Pinger pings one URL every period between its Start and its Stop. It
// is safe for concurrent use.
type Pinger struct {
	cfg    Config
	req    *url.URL
	own    bool // the client is the Pinger's own
	shown  string
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop returns

	mu    sync.Mutex // protects the fields below
	stats Stats
	state state
}

type state uint8

const (
	built state = iota
	started
	stopped
)

// New returns a Pinger configured by cfg, or an error if cfg.URL is not an
// http or https URL or a duration is negative. It sends nothing until
// Start.
func New(cfg Config) (*Pinger, error) {
	if err := CheckURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("ping: URL %s: %w", Redact(cfg.URL), err)
	}
	if cfg.Every < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("ping: Every (%s) and Timeout (%s) must not be negative", cfg.Every, cfg.Timeout)
	}
	u, _ := url.Parse(cfg.URL) // checked above
	if cfg.Every == 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Pinger{cfg: cfg, req: u, shown: Redact(cfg.URL), done: make(chan struct{})}
	if p.cfg.Client == nil {
		p.own = true
		p.cfg.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return p, nil
}

// CheckURL returns nil if s is an absolute http or https URL with a host.
// Its errors do not quote s, which is a secret.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("must be a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an http:// or https:// URL")
	case u.Host == "":
		return errors.New("must be a URL with a host")
	}
	return nil
}

// Redact returns s as logs may show it: its scheme and host, with the rest
// (the path, the query and any userinfo, where monitors put their secret)
// replaced by "[REDACTED]", as in https://hc-ping.com/[REDACTED]. Text that
// does not parse as a URL with a host is redacted whole.
func Redact(s string) string {
	const mark = "[REDACTED]"
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return mark
	}
	shown := u.Scheme + "://" + u.Host
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		shown += "/" + mark
	}
	return shown
}

// Start sends the first ping and then one every period, until Stop. It
// returns an error if the Pinger was started before.
func (p *Pinger) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != built {
		return errors.New("ping: Start called twice, or after Stop")
	}
	p.state = started
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.loop(ctx)
	return nil
}

// Stop ends the pings: a ping in flight is cancelled, and none is sent
// after Stop returns. It waits for the Pinger's goroutine, or for ctx's
// end, whose error it then returns. Stop before Start, or a second Stop,
// does nothing.
func (p *Pinger) Stop(ctx context.Context) error {
	p.mu.Lock()
	was := p.state
	p.state = stopped
	p.mu.Unlock()
	if was != started {
		return nil
	}
	p.cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("ping: stop: %w", ctx.Err())
	}
	if p.own {
		p.cfg.Client.CloseIdleConnections()
	}
	return nil
}

// Stats returns what the Pinger has done so far.
func (p *Pinger) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// loop pings at once and then at every tick of the clock until ctx ends.
func (p *Pinger) loop(ctx context.Context) {
	defer close(p.done)
	tick := p.cfg.Clock.NewTicker(p.cfg.Every)
	defer tick.Stop()
	for {
		p.ping(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
	}
}

// ping sends one ping and records its outcome.
func (p *Pinger) ping(ctx context.Context) {
	err := p.send(ctx)
	if ctx.Err() != nil {
		return // stopped: not a failure of the monitor's
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	p.stats.Pings++
	if err != nil {
		p.stats.Failures++
	} else {
		p.stats.LastSuccess = now
	}
	p.mu.Unlock()
	if err != nil {
		p.cfg.Logger.Warn("ndigo: ping failed", "url", p.shown, "err", err)
	}
}

// send sends one GET within the timeout. Its error never holds the URL.
func (p *Pinger) send(parent context.Context) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	timer := p.cfg.Clock.AfterFunc(p.cfg.Timeout, func() { cancel(ErrTimeout) })
	defer timer.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.req.String(), nil)
	if err != nil {
		return errors.New("cannot build the request")
	}
	req.Header.Set("User-Agent", "ndigo-ping")
	if p.cfg.Node != "" {
		req.Header.Set("User-Agent", "ndigo-ping (node "+p.cfg.Node+")")
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrTimeout) {
			return fmt.Errorf("%w (%s)", ErrTimeout, p.cfg.Timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error's message quotes the URL
		}
		return err
	}
	// Drained so that the connection may be reused; a monitor's answer is
	// short ("OK"), and a longer one is cut.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
