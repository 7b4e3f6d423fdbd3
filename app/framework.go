package app

import (
	"log/slog"
	"strings"
	"time"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/ping"
	"github.com/ndigo/ndigo/redislocks"
)

// The lock stores' rules are the drivers' own (both drivers take the same
// namespaces).
func init() {
	config.Rule("listen_addr", admin.CheckAddr)
	config.Rule("token_name", admin.CheckTokenName)
	config.Rule("redis_url", redislocks.CheckURL)
	config.Rule("postgres_url", pglocks.CheckURL)
	config.Rule("lock_namespace", redislocks.CheckNamespace)
	config.Rule("ping_url", ping.CheckURL)
	config.Rule("notify_url", ping.CheckURL) // an http or https URL with a host, not quoted in errors
}

// Framework holds the settings ndigo itself reads, which [Module] hands to
// each part of the framework. Embed it in the application's configuration
// struct with `yaml:",inline"` and load that with config.Module, which
// provides the Framework to the graph:
//
//	node: billing-1
//	redis:                # or postgres: (url, namespace) or etcd:, one of them
//	  url: redis://:password@redis.internal:6379/0
//	  namespace: prod
//	log:
//	  format: json
//	  level: info
//	zone: Europe/Paris
//	stop-timeout: 30s
//	admin:
//	  addr: 127.0.0.1:8081
//	  metrics: true
//	  token: a-long-random-string
//	ping:
//	  url: https://hc-ping.com/your-check-uuid
//	  every: 1m
//	  timeout: 10s
//	notify:
//	  webhook:
//	    url: https://hooks.example.com/ndigo
//	    secret: a-long-random-string
//	  slack:
//	    url: https://hooks.slack.com/services/T000/B000/XXXX
//	  every: 15s
type Framework struct {
	// Node names this process in logs and lock diagnostics. Empty lets the
	// application choose, e.g. from the host name.
	Node string `yaml:"node" validate:"max=128"`
	// Redis configures the Redis lock driver (redislocks.Module).
	Redis Redis `yaml:"redis"`
	// Postgres configures the PostgreSQL lock driver (pglocks.Module).
	Postgres Postgres `yaml:"postgres"`
	// Etcd configures the etcd lock driver, which etcdlocks.Module adds.
	Etcd Etcd `yaml:"etcd"`
	// Log configures the process's slog handler.
	Log Log `yaml:"log"`
	// Zone is the IANA zone (Europe/Paris) of cron expressions without a
	// CRON_TZ= prefix; empty means the process's local zone. Nodes that
	// share locked tasks must agree on it.
	Zone string `yaml:"zone" validate:"omitempty,timezone"`
	// StopTimeout is how long the application may take to stop: the
	// scheduler waits for runs in flight until a quarter of it (at most 2s)
	// is left, then cancels them and releases their leases. Zero means fx's
	// default, 15s.
	StopTimeout time.Duration `yaml:"stop-timeout" validate:"min=0"`
	// Admin configures the operations endpoints.
	Admin Admin `yaml:"admin"`
	// Spread is whether the nodes spread the fires of locked tasks among
	// them, so that each fire costs one node's lock calls: "auto" (on with
	// a Redis or PostgreSQL driver), "on" or "off" (every node tries every
	// fire). See scheduling.Config.Spread.
	Spread string `yaml:"spread" default:"auto" validate:"oneof=auto on off"`
	// Ping configures the pings to a monitor outside the cluster.
	Ping Ping `yaml:"ping"`
	// Notify configures the messages sent when a task's health changes.
	Notify Notify `yaml:"notify"`
}

// Notify configures the messages that tell an operator a task's health
// changed (scheduling.Alerter): "late", "down", "failing" or "overrun" when
// it enters the state, "recovered" when it is ok again. Each is sent by one
// node of the cluster, retried with backoff until delivered (eight attempts
// over about four minutes), and kept in the trail (GET /events, ndigo
// events). It needs a task state store: Redis, PostgreSQL or etcd, or the
// in-process default on one node.
type Notify struct {
	// Webhook receives each message as a JSON POST (package notify).
	Webhook NotifyWebhook `yaml:"webhook"`
	// Slack receives each message as a Slack incoming webhook's text.
	Slack NotifySlack `yaml:"slack"`
	// Every is how often each task's health is judged: a change is sent
	// within about Every.
	Every time.Duration `yaml:"every" default:"15s" validate:"min=1s"`
	// Timeout bounds each attempt to deliver a message.
	Timeout time.Duration `yaml:"timeout" default:"10s" validate:"min=1ms"`
}

// NotifyWebhook is a receiver of signed JSON messages.
type NotifyWebhook struct {
	// URL is the receiver's, http or https; empty sends none. A secret:
	// errors show its scheme and host only.
	URL config.Secret `yaml:"url" validate:"omitempty,notify_url"`
	// Secret keys each body's HMAC-SHA256 signature in the Ndigo-Signature
	// header, which notify.Verify checks. Required with URL.
	Secret config.Secret `yaml:"secret" validate:"required_with=URL"`
}

// NotifySlack is a Slack (or compatible) incoming webhook.
type NotifySlack struct {
	// URL is the incoming webhook's; empty sends none. A secret.
	URL config.Secret `yaml:"url" validate:"omitempty,notify_url"`
}

// Ping configures the pings that tell a monitor outside the cluster
// (healthchecks.io, an Uptime Kuma push monitor) that a node is
// scheduling: while its scheduler runs, each node sends a GET to URL at
// start and every period after (package ping), so that the monitor alarms
// once every node has been silent for longer than its own grace. A failed
// ping is logged, with the URL's path redacted, and counted in
// ndigo_ping_failures_total when admin.metrics is on.
type Ping struct {
	// URL is the monitor's ping URL, http or https; empty sends no pings.
	// It is a secret (a healthchecks URL holds the check's UUID): printed
	// or logged, it shows as [REDACTED], and a failed ping's line shows its
	// scheme and host only.
	URL config.Secret `yaml:"url" validate:"omitempty,ping_url"`
	// Every is the period between two pings of a node. Set the monitor's
	// period to it, and its grace to a few periods.
	Every time.Duration `yaml:"every" default:"1m" validate:"min=1s"`
	// Timeout bounds each ping; a ping that takes longer than Every
	// delays the next one.
	Timeout time.Duration `yaml:"timeout" default:"10s" validate:"min=1ms"`
}

// Admin configures the operations endpoints that app.Module serves: the
// admin handler (/scheduledtasks and its task control, /locks, /healthz)
// and Prometheus metrics.
type Admin struct {
	// Addr is the address to serve the endpoints on, such as
	// 127.0.0.1:8081; empty serves none. Keep it off public networks.
	Addr string `yaml:"addr" validate:"required_with=Metrics,omitempty,listen_addr"`
	// Metrics counts every task's runs, skips and lock calls, and serves
	// them at /metrics on Addr.
	Metrics bool `yaml:"metrics"`
	// Token is the bearer token that the control endpoints (run, pause,
	// resume, backfill, stored schedules and calendars) require; empty
	// refuses them unless Tokens has one. Reading needs none. Its
	// requests are by "admin".
	Token config.Secret `yaml:"token"`
	// Tokens are further tokens of the control endpoints by the name of
	// their holder (a person, a team, a CI job), which the log and a
	// pause's "by" name as the actor of each request: 1 to 64 letters,
	// digits, '.', '_', '@' or '-'; each token its own.
	Tokens map[string]config.Secret `yaml:"tokens" validate:"dive,keys,token_name,endkeys,required"`
}

// Redis configures the Redis lock driver.
type Redis struct {
	// URL is the go-redis URL, redis:// or rediss://, with the password, if
	// any, in its userinfo. Empty means no Redis: locks stay in-process,
	// which is correct on one node only.
	URL config.SecretURL `yaml:"url" validate:"omitempty,redis_url"`
	// Namespace isolates the lock keys of one environment from others
	// sharing the same Redis.
	Namespace string `yaml:"namespace" default:"default" validate:"lock_namespace"`
	// History is how many runs per task the nodes keep in Redis for
	// /scheduledtasks/{name}/runs; zero means 20.
	History int `yaml:"history" validate:"min=0,max=1000"`
}

// Postgres configures the PostgreSQL lock driver.
type Postgres struct {
	// URL is the connection URL, postgres:// or postgresql://, with the
	// password, if any, in its userinfo. Empty means no PostgreSQL.
	URL config.SecretURL `yaml:"url" validate:"omitempty,postgres_url"`
	// Namespace isolates the locks of one environment from others sharing
	// the same database.
	Namespace string `yaml:"namespace" default:"default" validate:"lock_namespace"`
	// History is how many runs per task the nodes keep in PostgreSQL;
	// zero means 20.
	History int `yaml:"history" validate:"min=0,max=1000"`
}

// Etcd configures the etcd lock driver and task state. Unlike the redis
// and postgres sections, which app.Module acts on itself, this one takes
// effect when the application includes etcdlocks.Module, so that
// applications without etcd do not link etcd's client; with endpoints set
// and the module left out, startup fails saying so.
//
//	etcd:
//	  endpoints: [https://etcd-0:2379, https://etcd-1:2379, https://etcd-2:2379]
//	  ca-file: /etc/etcd/ca.pem
//	  username: billing
//	  password: ${ETCD_PASSWORD}   # or NDIGO_ETCD_PASSWORD under the app's prefix
//	  namespace: prod
type Etcd struct {
	// Endpoints are the members' client URLs or host:port pairs; empty
	// means no etcd.
	Endpoints Endpoints `yaml:"endpoints" validate:"dive,required"`
	// Namespace isolates the keys of one environment from others sharing
	// the same cluster.
	Namespace string `yaml:"namespace" default:"default" validate:"lock_namespace"`
	// Username and Password authenticate with etcd's auth; Password needs
	// Username.
	Username string        `yaml:"username" validate:"required_with=Password"`
	Password config.Secret `yaml:"password"`
	// CAFile verifies the members' certificates; CertFile and KeyFile, set
	// together, are the client's own for mutual TLS.
	CAFile   string `yaml:"ca-file"`
	CertFile string `yaml:"cert-file" validate:"required_with=KeyFile"`
	KeyFile  string `yaml:"key-file" validate:"required_with=CertFile"`
	// DialTimeout bounds connecting to a member and the quorum check at
	// start; zero means 5s.
	DialTimeout time.Duration `yaml:"dial-timeout" validate:"min=0"`
	// History is how many runs per task the nodes keep in etcd; zero
	// means 20.
	History int `yaml:"history" validate:"min=0,max=1000"`
}

// Endpoints lists etcd members: a YAML list in the file, or
// comma-separated in an environment variable (NDIGO_ETCD_ENDPOINTS=
// https://etcd-0:2379,https://etcd-1:2379).
type Endpoints []string

// UnmarshalText reads comma-separated endpoints, spaces around each
// trimmed; an empty text is none.
func (e *Endpoints) UnmarshalText(b []byte) error {
	*e = nil
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	for _, s := range strings.Split(string(b), ",") {
		*e = append(*e, strings.TrimSpace(s))
	}
	return nil
}

// Log configures the process's slog handler.
type Log struct {
	// Format is "text" or "json".
	Format string `yaml:"format" default:"text" validate:"oneof=text json"`
	// Level is "debug", "info", "warn" or "error".
	Level string `yaml:"level" default:"info" validate:"oneof=debug info warn error"`
	// SkipLevel is the level of the scheduler's lines about skipped fires
	// (lock held, already claimed by another node, still running): every
	// node but one logs one per locked task and fire, so a cluster may want
	// them at "debug".
	SkipLevel string `yaml:"skip-level" default:"info" validate:"oneof=debug info warn error"`
}

// SlogLevel returns Level as a slog.Level; a level that did not validate
// reads as slog.LevelInfo.
func (l Log) SlogLevel() slog.Level { return slogLevel(l.Level) }

// SlogSkipLevel returns SkipLevel as a slog.Level, as SlogLevel does.
func (l Log) SlogSkipLevel() slog.Level { return slogLevel(l.SkipLevel) }

func slogLevel(level string) slog.Level {
	var l slog.Level // slog.LevelInfo, if level does not parse
	_ = l.UnmarshalText([]byte(level))
	return l
}
