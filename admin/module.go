package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/fx"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// ChecksGroup is the fx value group of [Check] values that [Module]'s
// /healthz probes; [RoutesGroup] holds extra [Route] values.
const (
	ChecksGroup = "admin.checks"
	RoutesGroup = "admin.routes"
)

// Config configures [Module]'s server.
type Config struct {
	// Addr is the address to serve the handler on, e.g. "127.0.0.1:8081"
	// or ":0"; "" serves nothing (mount the *Handler yourself).
	Addr string
	// ShutdownTimeout bounds the graceful shutdown on stop, besides fx's
	// stop timeout; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Token is the handler's [Options].Token: the bearer token of the
	// control endpoints; "" refuses them.
	Token Token
	// Tokens are the handler's [Options].Tokens: further bearer tokens by
	// the name of their holder, the actor of the requests sent with them.
	Tokens map[string]Token
	// ReadHeaderTimeout bounds reading a request's headers; zero means
	// DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, so that a
	// client that sends its headers and then stalls its body is cut off;
	// zero means DefaultReadTimeout.
	ReadTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request before the server closes it; zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// The timeouts of [Module]'s server when [Config] leaves them zero. The
// endpoints read no request body but POST .../backfill's few bytes, so a
// request is about its headers; a client slower than these holds a
// connection and a goroutine for nothing.
// The idle timeout keeps the connections of the console (a request every
// 2s) and of health probes every few seconds, and closes those left
// behind.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultShutdownTimeout   = 5 * time.Second
)

// Mount registers h under pattern (e.g. "GET /metrics") on [Module]'s
// handler.
func Mount(pattern string, h http.Handler) fx.Option {
	return fx.Supply(fx.Annotate(Route{Pattern: pattern, Handler: h}, fx.ResultTags(`group:"`+RoutesGroup+`"`)))
}

// Module provides a *Handler built from the graph's *scheduling.Scheduler,
// and a *Server that serves it on [Config].Addr when the graph has a
// Config with an address: the listener opens on start (a taken port fails
// startup) and the server shuts down gracefully on stop, before the
// scheduler stops.
//
// /healthz probes the backends of the graph's locks.Driver and
// taskstate.Store that implement locks.HealthChecker ([BackendChecks]: the
// Redis and PostgreSQL drivers and stores do), then the [Check] values of
// [ChecksGroup]. Extra routes come from [RoutesGroup] ([Mount]).
var Module = fx.Module("admin",
	fx.Provide(newModuleHandler, newServer),
	fx.Invoke(func(*Server) {}),
)

type handlerParams struct {
	fx.In
	Scheduler *scheduling.Scheduler
	// Driver and State are what the scheduler is built from (scheduling.Module
	// takes the same values), for their health checks.
	Driver locks.Driver    `optional:"true"`
	State  taskstate.Store `optional:"true"`
	Checks []Check         `group:"admin.checks"`
	Routes []Route         `group:"admin.routes"`
	Config Config          `optional:"true"`
	Logger *slog.Logger    `optional:"true"`
}

func newModuleHandler(p handlerParams) (*Handler, error) {
	checks := append(BackendChecks(p.Driver, p.State), p.Checks...)
	return New(Options{Scheduler: p.Scheduler, Checks: checks, Routes: p.Routes, Token: p.Config.Token, Tokens: p.Config.Tokens,
		Logger: p.Logger})
}

// A Server serves a Handler on its own address.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Addr returns the address the server listens on, with the port chosen for
// ":0"; "" if it does not serve.
func (s *Server) Addr() string {
	if s == nil || s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// CheckAddr says why addr cannot be the address [Config].Addr serves on,
// or returns nil: host:port or :port, with a port from 0 (any free one) to
// 65535. The reason never quotes addr. app registers it as the
// "listen_addr" configuration rule.
func CheckAddr(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err == nil {
		if _, err = strconv.ParseUint(port, 10, 16); err == nil {
			return nil
		}
	}
	return errors.New("must be host:port or :port, such as 127.0.0.1:8081 (port 0 picks a free one)")
}

type serverParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Handler   *Handler
	Config    Config       `optional:"true"`
	Logger    *slog.Logger `optional:"true"`
}

func newServer(p serverParams) (*Server, error) {
	s := &Server{}
	if p.Config.Addr == "" {
		return s, nil
	}
	if err := CheckAddr(p.Config.Addr); err != nil {
		return nil, fmt.Errorf("%w: Config.Addr %q %v", ErrInvalid, p.Config.Addr, err)
	}
	grace, err := timeout("ShutdownTimeout", p.Config.ShutdownTimeout, DefaultShutdownTimeout)
	if err != nil {
		return nil, err
	}
	readHeader, err := timeout("ReadHeaderTimeout", p.Config.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	if err != nil {
		return nil, err
	}
	read, err := timeout("ReadTimeout", p.Config.ReadTimeout, DefaultReadTimeout)
	if err != nil {
		return nil, err
	}
	idle, err := timeout("IdleTimeout", p.Config.IdleTimeout, DefaultIdleTimeout)
	if err != nil {
		return nil, err
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	s.srv = &http.Server{Handler: p.Handler, ReadHeaderTimeout: readHeader, ReadTimeout: read, IdleTimeout: idle,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", p.Config.Addr)
			if err != nil {
				return fmt.Errorf("admin: listen on %s (Config.Addr): %w", p.Config.Addr, err)
			}
			s.ln = ln
			log.Info("admin endpoints serving", "addr", ln.Addr().String())
			go func() {
				defer close(done)
				if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("admin server failed", "addr", ln.Addr().String(), "err", err)
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, grace)
			defer cancel()
			err := s.srv.Shutdown(ctx)
			if err != nil {
				_ = s.srv.Close()
			}
			<-done
			return err
		},
	})
	return s, nil
}

// timeout returns the Config field's value d, or def when d is zero.
func timeout(field string, d, def time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("%w: Config.%s %v must not be negative (zero means %v)", ErrInvalid, field, d, def)
	case d == 0:
		return def, nil
	}
	return d, nil
}
