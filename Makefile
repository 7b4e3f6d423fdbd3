# make test: every check CI runs. It installs redis-server, redis-sentinel,
# PostgreSQL, PgBouncer, etcd-server, chromium and promtool from Debian's packages when
# they are missing (as root), or says what to install.
GO          ?= go
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...

.PHONY: test fmt vet staticcheck unit property redis-server postgresql etcd-server chromium promtool bench chaos fuzz fuzz-short screenshots

test: fmt vet staticcheck redis-server postgresql etcd-server chromium promtool unit property fuzz-short

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change these files (run gofmt -w):"; echo "$$out"; exit 1; fi

# TAGS: the build tags of the optional parts, which vet, staticcheck and
# the tests build too (the payroll example's --etcd: examples/payroll/etcd*.go).
TAGS        := etcd

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags $(TAGS) ./examples/...
	cd bench && $(GO) vet ./...

staticcheck:
	$(STATICCHECK) $(PKGS)
	$(STATICCHECK) -tags $(TAGS) ./examples/...

# unit: -p 4 runs four packages' tests at once on 2 cores: most of the long
# ones (the fault tests, the payroll processes, the servers' conformance)
# wait on real servers and processes rather than compute, and one at a time
# left the cores idle (make test took 12 minutes at -p 2, 7 at -p 4).
unit:
	$(GO) test -race -count=1 -p 4 -tags $(TAGS) $(PKGS)

# property: the next-fire property test's full walk (every minute of ten
# years in twenty zones against a brute force), which the race detector
# would make take minutes: unit runs a year in three zones.
property:
	$(GO) test -count=1 -run '^TestNextRunAgainstBruteForce$$' ./scheduling/

# redis-server: the Redis binaries the tests start: redis-server and
# redis-cli (package redis-server), redis-sentinel (package redis-sentinel).
redis-server:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1 || \
		! command -v redis-sentinel >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing redis-server and redis-sentinel from Debian's packages"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-sentinel >/dev/null; \
		else \
			echo "make test needs redis-server, redis-cli and redis-sentinel: install them (Debian: sudo apt-get install redis-server redis-sentinel)"; exit 1; \
		fi; \
	fi

# postgresql: the PostgreSQL binaries pglocks' tests start (internal/pgproc):
# initdb and postgres, in PATH or under /usr/lib/postgresql/*/bin (package
# postgresql, which also makes the postgres user they run as when root), and
# pgbouncer (package pgbouncer), which the driver is tested through.
postgresql:
	@if ! { command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; } && \
		! ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || \
		! { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; }; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing postgresql and pgbouncer from Debian's packages"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql pgbouncer >/dev/null; \
		else \
			echo "make test needs PostgreSQL's initdb and postgres, and pgbouncer: install them (Debian: sudo apt-get install postgresql pgbouncer)"; exit 1; \
		fi; \
	fi

# etcd-server: the etcd binary etcdlocks' tests start (internal/etcdproc):
# etcd, in PATH or /usr/bin/etcd (package etcd-server, etcd 3.4).
etcd-server:
	@if ! command -v etcd >/dev/null 2>&1 && ! [ -x /usr/bin/etcd ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing etcd-server from Debian's packages"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; \
		else \
			echo "make test needs etcd: install it (Debian: sudo apt-get install etcd-server)"; exit 1; \
		fi; \
	fi

# chromium: the browser the web console's tests drive headless through
# chromedp (internal/browsertest looks for chromium, chromium-browser and
# /usr/bin/chromium; package chromium).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && \
		! [ -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium from Debian's packages"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "make test needs chromium for the web console's browser tests: install it (Debian: sudo apt-get install chromium)"; exit 1; \
		fi; \
	fi

# promtool: Prometheus's rule checker, with which docs' TestAlertRules checks
# the shipped alerting rules (docs/ndigo-rules.yml); package prometheus,
# without its recommended node exporter. The package also enables a
# prometheus service (port 9090): a container's policy-rc.d keeps it from
# starting, and under systemd it is stopped and disabled again, since the
# tests need the binary alone.
promtool:
	@if ! command -v promtool >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing promtool (package prometheus) from Debian's packages"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
			if [ -d /run/systemd/system ]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi; \
		else \
			echo "make test needs promtool: install it (Debian: sudo apt-get install --no-install-recommends prometheus)"; exit 1; \
		fi; \
	fi

# Every fuzz target, as package:Target; -fuzz runs one target per invocation.
FUZZ_TARGETS := ./locks:FuzzCheck ./redislocks:FuzzNamespace ./pglocks:FuzzNamespace ./docs:FuzzValidate \
	./scheduling:FuzzParseSchedule ./scheduling:FuzzNextUTC \
	./annotations:FuzzParseTag ./annotations:FuzzParseDuration ./annotations:FuzzControllerTag ./annotations:FuzzExpand \
	./config:FuzzLoad
FUZZTIME ?= 2m

# fuzz-short: each target for 3,000 inputs (part of make test); fuzz: each for
# $(FUZZTIME). The short run counts inputs rather than seconds: on Go 1.26 a
# run bounded by time can fail at its deadline with "context deadline
# exceeded" and no failing input (golang/go#75804, fixed in Go 1.27), which a
# loaded machine hits now and then.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=3000x

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn in $$pkg for $(FUZZTIME)"; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
	done

# chaos: the long fault runs: the cluster simulation over 100,000 fires, a
# simulated day of a task every second on PostgreSQL, a linearizability
# history of 100,000 operations under Redis pauses, 100 stalls of a lease
# holder on PostgreSQL and on etcd, every fault test three times, and the
# payroll failover tests on Redis, PostgreSQL and etcd, and the alerts of
# three payroll nodes on PostgreSQL through a paused database and a kill.
chaos: redis-server postgresql etcd-server
	$(GO) test -race -count=1 -run '^TestClusterSimulation$$' -v ./scheduling/schedulingtest -sim.fires 100000
	$(GO) test -race -count=1 -timeout 60m -run '^TestDayOfFiresLeavesBoundedRows$$' -v ./pglocks -pg.fires 86400
	$(GO) test -race -count=1 -run '^TestLinearizable$$' -v ./internal/chaos -lin.ops 100000
	$(GO) test -race -count=1 -timeout 60m -run '^TestStalledHoldersAreFenced$$' -v ./internal/chaos -stall.n 100
	$(GO) test -race -count=3 ./internal/chaos
	$(GO) test -count=1 -tags $(TAGS) -run '^(TestOwnerKilledLosesNoFire|TestRollingRestartLosesNoFire|TestAlertsFromThreeNodesOnPostgres)$$' -v ./examples/payroll -failover.all

# screenshots: renders the web console of a live 3-node payroll cluster on
# Redis in chromium (the task list, a task's page with its audit and
# history) into docs/console-tasks.png and docs/console-task.png, which the
# README shows. make test renders them too, into a temporary directory.
screenshots: redis-server chromium
	$(GO) test -count=1 -run '^TestConsoleScreenshots$$' ./examples/payroll -args -screenshots=$(CURDIR)/docs

# bench: runs bench/ (scheduler vs gocron v2 and robfig/cron, the Redis driver
# vs bsm/redislock, redsync and raw loops, the PostgreSQL driver vs advisory
# lock loops, the 3-node cluster run) and package locks' in-process
# benchmarks, and rewrites BENCHMARKS.md's generated parts. About 30 minutes;
# never part of make test.
bench: redis-server postgresql etcd-server
	cd bench && $(GO) run ./cmd/benchreport -o ../BENCHMARKS.md
