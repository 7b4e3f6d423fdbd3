package main

// The failover mode (-failover) of issue 36: N nodes × T tasks every second,
// each system in its own row-run on its own store, and one event in the
// window of each row-run:
//
//   - kill: SIGKILL of an owner (ndigo: the node that owns the most tasks
//     by the majority of the nodes' views, TaskInfo.Owner; gocron-elector:
//     the leader), at a half second, when no run is in flight;
//   - stop: SIGSTOP of that owner at a half second, held for the lock TTL
//     plus 3s (past its lease), then SIGCONT;
//   - rolling: every node in turn gets SIGTERM; once it exited, a new
//     process of the same name starts, and once it is ready (ndigo: Start
//     returned and its view of the group has every node as the owner of
//     some task; gocron: Start returned) the next node's turn comes at the
//     half second after the next whole second, so that at least one
//     instant passes between two turns.
//
// The window opens at a half second, the event comes 5s later, and the
// window closes at a half second 2 lock TTLs + 5s after the event ended (the
// SIGKILL sent, the SIGCONT sent, the last node ready), which a late fire's
// deadline (a lock TTL and two heartbeats after a takeover, which comes
// three heartbeats after the owner's last) falls within. Its instants are the
// whole seconds strictly inside it, each due once per task. Every process's
// runs count, the dead ones' too (a node writes a run as it starts it): lost
// = instants of a task that no process ran by -grace after the window's
// end; doubles = instants of a task that ran more than once; a run's
// lateness = its start minus its instant, and a run is late past a second.
// The load is /proc/loadavg's 1-minute figure at the window's end. The
// table has a row per row-run (-runs, 1 by default here): a loss is not
// averaged away.
//
//	cd bench && go run ./cmd/scalebench -failover kill,stop,rolling                          # N = 3, 10; Redis, PostgreSQL, etcd; gocron-elector
//	cd bench && go run ./cmd/scalebench -failover kill -nodes 3 -systems ndigo,gocron-elector

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ndigo/ndigo/internal/pgproc"
)

const (
	// lateAfter is the lateness past which a run is late.
	lateAfter = time.Second
	// eventAfter is how long after the window's opening the event comes.
	eventAfter = 5 * time.Second
	// stopPast is how long past the lock TTL a SIGSTOP holds a node.
	stopPast = 3 * time.Second
)

// failoverEvents are the events -failover accepts.
var failoverEvents = []string{"kill", "stop", "rolling"}

// A failoverResult is one failover row-run's figures.
type failoverResult struct {
	system, event  string
	nodes, tasks   int
	victim         string        // kill, stop: the node signalled
	owned          int           // ndigo: the tasks it owned just before
	at             time.Time     // when the event began (the signal sent)
	span           time.Duration // how long the event took: stop, rolling
	expected, runs int           // task instants due in the window; runs of them
	lost, doubles  int
	late           []float64 // lateness of the late runs, ms, ascending
	p99            float64   // p99 lateness of every run, ms
	load           float64
}

func (r failoverResult) summary() string {
	return fmt.Sprintf("%s %d × %d %s: victim %q owning %d tasks, event at %s for %v; runs %d / %d due, lost %d, doubles %d, late %d (p50 %s, p99 %s, max %s), p99 of all %s, load %.2f",
		r.event, r.nodes, r.tasks, r.system, r.victim, r.owned, r.at.UTC().Format("15:04:05.000"), r.span.Round(100*time.Millisecond), r.runs, r.expected, r.lost, r.doubles,
		len(r.late), pct(r.late, 50), pct(r.late, 99), pct(r.late, 100), ms(r.p99), r.load)
}

// pct formats the p-th percentile of the ascending xs (ms), "–" if empty.
func pct(xs []float64, p int) string {
	if len(xs) == 0 {
		return "–"
	}
	return ms(xs[min(len(xs)-1, len(xs)*p/100)])
}

// runFailover runs the failover mode; set holds the flags given.
func runFailover(set map[string]bool) {
	events := strings.Split(*failover, ",")
	for _, e := range events {
		if !slices.Contains(failoverEvents, e) {
			log.Fatalf("scalebench: -failover: unknown event %q (want some of %s)", e, strings.Join(failoverEvents, ","))
		}
	}
	if !set["nodes"] {
		*nodesFlag = "3,10"
	}
	if !set["tasks"] {
		*tasksFlag = "100"
	}
	if !set["ttl"] {
		*ttlFlag = 5 * time.Second
	}
	if !set["runs"] {
		*runsFlag = 1
	}
	if !set["systems"] {
		*systemsFlag = "ndigo,ndigo-pg,ndigo-etcd,gocron-elector"
	}
	if *cronFlag != everySecond {
		log.Fatal("scalebench: -failover runs every task every second: -cron is not for it")
	}
	systems := strings.Split(*systemsFlag, ",")
	for _, sys := range systems {
		if !slices.Contains([]string{"ndigo", "ndigo-pg", "ndigo-etcd", "gocron-elector"}, sys) {
			log.Fatalf("scalebench: -failover: system %q: want ndigo, ndigo-pg, ndigo-etcd or gocron-elector", sys)
		}
	}
	nodes, tasks := ints(*nodesFlag), ints(*tasksFlag)

	pg := postgresFor(systems)
	if pg != nil {
		defer pg.Stop()
	}

	fmt.Printf("Command: `cd bench && go run ./cmd/scalebench %s`\n\n", shellJoin(os.Args[1:]))
	fmt.Printf("Every node is a process of its own with its own client; every task `@every 1s` (cron `%s`) with a lock TTL of %v "+
		"(ndigo: Spread, the default heartbeat, 1s, a member dropped after missing 3; gocron v2: WithDistributedElector on a bsm/redislock lease of %v, extended every second, "+
		"on its own redis-server in every row, whatever ndigo's store); a %v warm-up, the event %v into the window at a half second, the "+
		"window closing at a half second 2 TTLs + 5s after the event ended; stop = SIGSTOP for the TTL + %v, then SIGCONT; rolling = SIGTERM, "+
		"exit, a new process of the same name, ready, then the next node at the half second after the next whole second. Lost = task instants of the window no process ran by %v after it; "+
		"doubles = task instants run more than once; late = runs started more than %v after their instant (gocron gives a job no instant: the "+
		"whole second at or before its start stands for it, so its lateness cannot show above a second); p99 all = every run's; load = "+
		"/proc/loadavg's 1-minute figure at the window's end (the machine has %d cores). One row per run.\n\n",
		everySecond, *ttlFlag, *ttlFlag, *warmup, eventAfter, stopPast, *grace, lateAfter, numCPU())
	fmt.Println("| nodes × tasks | event | system | node signalled | event took | runs / due | lost | doubles | late runs | late p50 | late p99 | late max | p99 all | load |")
	fmt.Println("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for range *runsFlag {
		for _, n := range nodes {
			for _, t := range tasks {
				for _, e := range events {
					for _, sys := range systems {
						r, err := measureFailover(sys, n, t, e, pg)
						if err != nil {
							log.Fatalf("scalebench: -failover %s: %d × %d %s: %v", e, n, t, sys, err)
						}
						log.Print(r.summary())
						took := "–"
						if r.span > 0 {
							took = fmt.Sprintf("%.1f s", r.span.Seconds())
						}
						victim := r.victim
						if r.owned > 0 {
							victim += fmt.Sprintf(" (%d tasks)", r.owned)
						}
						fmt.Printf("| %d × %s | %s | %s | %s | %s | %s / %s | %d | %d | %d | %s | %s | %s | %s | %.2f |\n",
							n, thousands(t), e, failoverLabel(sys), victim, took, thousands(r.runs), thousands(r.expected), r.lost, r.doubles,
							len(r.late), pct(r.late, 50), pct(r.late, 99), pct(r.late, 100), ms(r.p99), r.load)
					}
				}
			}
		}
	}
}

// failoverLabel is label, saying where gocron's lease is.
func failoverLabel(system string) string {
	if system == "gocron-elector" {
		return label(system) + " (Redis lease)"
	}
	return label(system)
}

// measureFailover runs one failover row-run of system: n nodes × tasks
// tasks, and event in the window.
func measureFailover(system string, n, tasks int, event string, pg *pgproc.Server) (failoverResult, error) {
	res := failoverResult{system: system, event: event, nodes: n, tasks: tasks}
	st, err := openStore(context.Background(), system, pg)
	if err != nil {
		return res, err
	}
	defer st.close()

	var all, alive []*proc            // every process started; those running, by node
	defer func() { killAll(alive) }() // after an error; a no-op once they exited
	for i := range n {
		p, err := spawn(system, "n"+strconv.Itoa(i), tasks, st)
		if err != nil {
			return res, err
		}
		all, alive = append(all, p), append(alive, p)
	}
	for _, p := range alive {
		if err := ready(p, system, n); err != nil {
			return res, err
		}
	}
	time.Sleep(*warmup)
	open := time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)
	at := open.Add(eventAfter)

	var victim int
	if event != "rolling" {
		sleepUntil(at.Add(-300 * time.Millisecond))
		if victim, res.owned, err = owner(alive, system); err != nil {
			return res, err
		}
		res.victim = alive[victim].name
	}
	sleepUntil(at)
	res.at = time.Now()
	switch event {
	case "kill":
		p := alive[victim]
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		_ = p.cmd.Wait()
		alive = slices.Delete(alive, victim, victim+1)
	case "stop":
		p := alive[victim]
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return res, fmt.Errorf("SIGSTOP %s: %w", p.name, err)
		}
		time.Sleep(*ttlFlag + stopPast)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			return res, fmt.Errorf("SIGCONT %s: %w", p.name, err)
		}
	case "rolling":
		for i, p := range alive {
			if _, err := terminate([]*proc{p}); err != nil {
				alive = slices.Delete(alive, i, i+1)
				return res, err
			}
			np, err := spawn(system, p.name, tasks, st)
			if err != nil {
				alive = slices.Delete(alive, i, i+1)
				return res, err
			}
			alive[i] = np
			all = append(all, np)
			if err := ready(np, system, n); err != nil {
				return res, err
			}
			// At least one instant passes between two nodes' turns.
			sleepUntil(time.Now().Truncate(time.Second).Add(1500 * time.Millisecond))
		}
	}
	if event != "kill" {
		res.span = time.Since(res.at)
	}
	closeAt := time.Now().Truncate(time.Second).Add(2**ttlFlag + 5*time.Second + 500*time.Millisecond)
	sleepUntil(closeAt)
	res.load = loadAvg()
	time.Sleep(*grace)
	_, err = terminate(alive)
	alive = nil
	if err != nil {
		return res, err
	}

	first, last := open.Unix()+1, closeAt.Unix()
	res.expected = int(last-first+1) * tasks
	ran := map[[2]int64]int{}
	var lates []float64
	for _, p := range all {
		p.mu.Lock()
		for _, r := range p.runs {
			if r.fire < first || r.fire > last {
				continue
			}
			ran[[2]int64{int64(r.task), r.fire}]++
			res.runs++
			l := float64(r.lateUs) / 1000
			lates = append(lates, l)
			if l > float64(lateAfter/time.Millisecond) {
				res.late = append(res.late, l)
			}
		}
		p.mu.Unlock()
	}
	lost, doubles := map[int64][]int{}, map[int64][]int{}
	for s := first; s <= last; s++ {
		for i := range tasks {
			switch c := ran[[2]int64{int64(i), s}]; {
			case c == 0:
				res.lost++
				lost[s] = append(lost[s], i)
			case c > 1:
				res.doubles++
				doubles[s] = append(doubles[s], i)
			}
		}
	}
	logInstants(system, event, "lost", lost)
	logInstants(system, event, "run twice or more", doubles)
	slices.Sort(lates)
	slices.Sort(res.late)
	if len(lates) > 0 {
		res.p99 = lates[min(len(lates)-1, len(lates)*99/100)]
	}
	return res, nil
}

// ready waits for p's ready message and, for ndigo, until its view of the
// group has n nodes owning tasks.
func ready(p *proc, system string, n int) error {
	if _, err := p.await("ready", time.Minute); err != nil {
		return err
	}
	if !strings.HasPrefix(system, "ndigo") {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms, err := ask([]*proc{p}, "owners")
		if err != nil {
			return err
		}
		owners := map[string]bool{}
		for _, o := range ms[0].Owners {
			if o != "" {
				owners[o] = true
			}
		}
		if len(owners) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: its view has %d nodes owning tasks 30s after its start, want %d", p.name, len(owners), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// owner returns the index in ps of the node to signal, and for ndigo how
// many tasks it owns: for ndigo the node owning the most tasks by the
// majority of the nodes' views (the first on a tie), for gocron-elector
// the leader.
func owner(ps []*proc, system string) (int, int, error) {
	ms, err := ask(ps, "owners")
	if err != nil {
		return 0, 0, err
	}
	if system == "gocron-elector" {
		for i, m := range ms {
			if m.Leader {
				return i, 0, nil
			}
		}
		return 0, 0, fmt.Errorf("no gocron-elector node leads")
	}
	owned := map[string]int{}
	for task := range ms[0].Owners {
		votes := map[string]int{}
		for _, m := range ms {
			votes[m.Owners[task]]++
		}
		best, most := "", 0
		for o, v := range votes {
			if v > most || v == most && o < best {
				best, most = o, v
			}
		}
		owned[best]++
	}
	best, most := -1, 0
	for i, p := range ps {
		if owned[p.name] > most {
			best, most = i, owned[p.name]
		}
	}
	if best < 0 {
		return 0, 0, fmt.Errorf("no node owns a task")
	}
	return best, most, nil
}

// logInstants logs, per instant, the tasks whose instant was lost or ran
// more than once.
func logInstants(system, event, what string, at map[int64][]int) {
	keys := make([]int64, 0, len(at))
	for s := range at {
		keys = append(keys, s)
	}
	slices.Sort(keys)
	for _, s := range keys {
		ts := at[s]
		names := make([]string, 0, min(len(ts), 10))
		for _, i := range ts[:min(len(ts), 10)] {
			names = append(names, taskName(i))
		}
		more := ""
		if len(ts) > 10 {
			more = fmt.Sprintf(" and %d more", len(ts)-10)
		}
		log.Printf("%s %s: instant %s %s: %d tasks (%s%s)", system, event, time.Unix(s, 0).UTC().Format("15:04:05"), what, len(ts),
			strings.Join(names, ", "), more)
	}
}
