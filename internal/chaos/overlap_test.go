package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// The overlap tests' clusters: three chaos nodes each on a private
// redis-server, Job every overlapPeriod, working longer than that, with
// spreading off so that every node tries every fire and runs move from node
// to node.
const (
	overlapPeriod = 2 * time.Second
	// overlapWithin bounds how long a cluster runs before its nodes are
	// killed; each stops as soon as it shows what its checks need (about
	// 25 s on an idle machine).
	overlapWithin = 60 * time.Second
	// overlapPoll is how soon a node learns what another node left in the
	// task state: the chaos nodes leave Config.RequestPoll at its default.
	overlapPoll = scheduling.DefaultRequestPoll
	// overlapMargin is what may come on top of a poll between a fire and
	// what a node does about it: the fire's lateness, a claim and a take
	// (a round trip each), the cancelled run's Extend and end write, and the
	// delays of a loaded 2-core machine running 9 race-built nodes.
	overlapMargin = time.Second
)

// An overlapCluster is one policy's cluster: its nodes' settings, when it
// has shown enough, and what it must show.
type overlapCluster struct {
	policy string
	env    []string
	// enough reports whether the history shows what the checks need,
	// saying what it lacks otherwise.
	enough func(h *overlapHistory) (bool, string)
	check  func(t *testing.T, h *overlapHistory)

	srv   *redistest.Server
	c     *redis.Client
	p     *nodetest.Procs
	store *redislocks.Store
	h     *overlapHistory
	lack  string // what enough last said it lacks; "" once enough
	took  time.Duration
}

var overlapNodes = []string{"n0", "n1", "n2"}

// The overlap policies on three real node processes sharing one Redis: a
// cluster per policy, the three running at once, each until it showed
// what its checks need (bounded by overlapWithin), when its nodes are
// killed and the fenced ledger, the shared history (the task state's runs,
// read from Redis) and the nodes' logs are checked.
//
//   - buffer-one: runs never overlap, each fire runs at most once, a fire
//     that found a run going ("buffered") runs after that run ended and
//     within a poll of it, at most one fire waits at a time and the fires
//     due meanwhile are "skipped: one waiting".
//   - cancel-previous: every run but the last is cancelled ("cancelled",
//     ErrSuperseded, on its own node), within a poll and a margin of the
//     later fire when another node buffered that fire, at once (before the
//     node logs that the fire waits) when its own node did; the later
//     fire's run starts only after the cancelled run ended.
//   - allow:2: at most two runs at once and at times two, each in a slot
//     of the lock key of its own, with tokens increasing per slot, each
//     fire at most once.
func TestOverlapOnNodes(t *testing.T) {
	clusters := []*overlapCluster{
		{
			policy: scheduling.OverlapBufferOne,
			env:    []string{"CHAOS_WORK=4500ms", "CHAOS_TTL=15s"},
			enough: func(h *overlapHistory) (bool, string) {
				waited := 0
				for _, r := range h.runs {
					if r.end >= 0 && h.buffered[r.fire] != nil {
						waited++
					}
				}
				return waited >= 3 && len(h.full) >= 2, fmt.Sprintf("%d finished runs of fires that waited (want 3), %d fires skipped as one waited (want 2)",
					waited, len(h.full))
			},
			check: checkBufferOne,
		},
		{
			policy: scheduling.OverlapCancelPrevious,
			// Runs that would work 20s unless cancelled: a run that ends
			// otherwise was not.
			env: []string{"CHAOS_WORK=20s", "CHAOS_TTL=30s"},
			enough: func(h *overlapHistory) (bool, string) {
				cancelled, remote, local := 0, 0, 0
				for _, r := range h.runs {
					rec := h.ran[r.fire]
					if rec == nil || rec.Outcome != string(scheduling.OutcomeCancelled) {
						continue
					}
					cancelled++
					switch b := h.nextBuffered(r.fire); {
					case b == nil:
					case b.Node != rec.Node:
						remote++
					default:
						local++
					}
				}
				return cancelled >= 5 && remote >= 2,
					fmt.Sprintf("%d cancelled runs (want 5), %d of them by a fire another node buffered (want 2), %d by one the same node did",
						cancelled, remote, local)
			},
			check: checkCancelPrevious,
		},
		{
			policy: scheduling.OverlapAllow + ":2",
			env:    []string{"CHAOS_WORK=4500ms", "CHAOS_TTL=15s"},
			enough: func(h *overlapHistory) (bool, string) {
				done, most := 0, 0
				open := 0
				for _, e := range h.entries {
					switch e.what {
					case "start":
						open++
						most = max(most, open)
					case "end":
						open--
						done++
					}
				}
				return done >= 5 && most >= 2, fmt.Sprintf("%d finished runs (want 5), at most %d at once (want 2)", done, most)
			},
			check: checkAllow2,
		},
	}
	start := time.Now()
	for _, c := range clusters {
		c.srv = redistest.Start(t)
		c.c = c.srv.Client()
		c.p = nodetest.New(t)
		st, err := redislocks.NewStore(redislocks.StoreOptions{Client: c.c, Namespace: nodeNS, History: nodeHistory})
		if err != nil {
			t.Fatal(err)
		}
		c.store = st
		for _, n := range overlapNodes {
			startNode(c.p, n, c.srv.Addr(), append([]string{"CHAOS_OVERLAP=" + c.policy, "CHAOS_SPREAD=off",
				"CHAOS_CRON=@every " + overlapPeriod.String()}, c.env...)...)
		}
	}
	deadline := start.Add(overlapWithin)
	for _, c := range clusters {
		c.await(t, deadline)
		c.took = time.Since(start)
		for _, n := range overlapNodes {
			c.p.Signal(n, syscall.SIGKILL)
		}
		for _, n := range overlapNodes {
			_ = c.p.WaitExit(n, 10*time.Second) // killed: the error says so
		}
		h, err := c.read()
		if err != nil {
			t.Fatalf("%s: reading the history after the kill: %v", c.policy, err)
		}
		c.h = h
	}
	for _, c := range clusters {
		t.Run(c.policy, func(t *testing.T) {
			t.Logf("%s: ran %v, %d runs in the ledger, %d records in the history", c.policy, c.took.Round(100*time.Millisecond),
				len(c.h.runs), len(c.h.records))
			if ok, lack := c.enough(c.h); !ok {
				t.Errorf("within %v the cluster did not show enough: %s", overlapWithin, lack)
			}
			checkNodeLines(t, c.h)
			c.check(t, c.h)
			if t.Failed() {
				c.h.dump(t)
			}
		})
	}
}

// await reads c's history every 200ms until it is enough or deadline
// passes.
func (c *overlapCluster) await(t *testing.T, deadline time.Time) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		h, err := c.read()
		if err == nil {
			var ok bool
			if ok, c.lack = c.enough(h); ok {
				c.lack = ""
				return
			}
		} else {
			c.lack = err.Error()
		}
		if time.Now().After(deadline) {
			t.Logf("%s: not enough by the deadline: %s", c.policy, c.lack)
			return
		}
		<-tick.C
	}
}

// A ledgerEntry is one entry of the fenced ledger: "what fire node token
// key".
type ledgerEntry struct {
	what, fire, node, key string
	token                 uint64
}

// A ledgerRun is a run as the ledger has it: its start entry and its end
// entry's index (-1 if it has none: the run was in flight at the kill).
type ledgerRun struct {
	ledgerEntry
	start, end int
}

// An overlapHistory is what a cluster left: the ledger, the runs in it in
// the order they started, the shared history by outcome, and the nodes'
// log lines.
type overlapHistory struct {
	entries  []ledgerEntry
	runs     []ledgerRun
	records  []taskstate.Run            // oldest first
	ran      map[string]*taskstate.Run  // by fire: the run's record
	buffered map[string]*taskstate.Run  // by fire: the record of a fire that waited
	full     []*taskstate.Run           // fires skipped as one waited, by fire
	extra    map[string][]taskstate.Run // by fire: records of a second run of one fire
	lines    []nodetest.Line
	problems []string // entries that do not parse, ends without a start
}

// read reads c's ledger, shared history and log lines.
func (c *overlapCluster) read() (*overlapHistory, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := c.c.LRange(ctx, ledgerKeys[0], 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the ledger: %w", err)
	}
	recs, err := c.store.Runs(ctx, nodeTask, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the history: %w", err)
	}
	slices.Reverse(recs)
	h := &overlapHistory{records: recs, ran: map[string]*taskstate.Run{}, buffered: map[string]*taskstate.Run{},
		extra: map[string][]taskstate.Run{}, lines: c.p.All()}
	for _, e := range raw {
		f := strings.Fields(e)
		var tok uint64
		if len(f) == 5 {
			tok, err = strconv.ParseUint(f[3], 10, 64)
		}
		if len(f) != 5 || err != nil {
			h.problems = append(h.problems, fmt.Sprintf("ledger entry %q does not parse", e))
			continue
		}
		h.entries = append(h.entries, ledgerEntry{what: f[0], fire: f[1], node: f[2], token: tok, key: f[4]})
	}
	open := map[ledgerEntry]int{} // by start entry (what "start"): its run's index
	for i, e := range h.entries {
		switch e.what {
		case "start":
			open[e] = len(h.runs)
			h.runs = append(h.runs, ledgerRun{ledgerEntry: e, start: i, end: -1})
		case "end":
			s := e
			s.what = "start"
			k, ok := open[s]
			if !ok {
				h.problems = append(h.problems, fmt.Sprintf("ledger entry %d, the end of fire %s on %s (token %d), has no start", i, e.fire, e.node, e.token))
				continue
			}
			delete(open, s)
			h.runs[k].end = i
		}
	}
	for i := range recs {
		r := &recs[i]
		f := nodetest.FireString(r.Fire)
		switch r.Outcome {
		case string(scheduling.OutcomeBuffered):
			h.buffered[f] = r
		case string(scheduling.OutcomeBufferFull):
			h.full = append(h.full, r)
		case string(scheduling.OutcomeOK), string(scheduling.OutcomeCancelled), string(scheduling.OutcomeError), string(scheduling.OutcomePanic):
			if h.ran[f] != nil {
				h.extra[f] = append(h.extra[f], *r)
				continue
			}
			h.ran[f] = r
		}
	}
	sort.Slice(h.full, func(i, j int) bool { return h.full[i].Fire.Before(h.full[j].Fire) })
	return h, nil
}

// bufferedFires returns the fires that waited, in order.
func (h *overlapHistory) bufferedFires() []string {
	var out []string
	for f := range h.buffered {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// nextBuffered returns the record of the first fire after fire that
// waited, nil if none did.
func (h *overlapHistory) nextBuffered(fire string) *taskstate.Run {
	for _, f := range h.bufferedFires() {
		if f > fire {
			return h.buffered[f]
		}
	}
	return nil
}

// end returns when the run of r ended, on its node's clock.
func end(r *taskstate.Run) time.Time { return r.Start.Add(r.Duration) }

// dump logs the ledger and the history, for a failed check.
func (h *overlapHistory) dump(t *testing.T) {
	t.Helper()
	var b strings.Builder
	for i, e := range h.entries {
		fmt.Fprintf(&b, "\n  %3d %s %s %s token %d %s", i, e.what, e.fire[11:], e.node, e.token, e.key)
	}
	t.Logf("ledger:%s", b.String())
	b.Reset()
	for _, r := range h.records {
		fmt.Fprintf(&b, "\n  fire %s %-22s node %s attempt %d token %d", nodetest.FireString(r.Fire)[11:], r.Outcome, r.Node, r.Attempt, r.Token)
		if !r.Start.IsZero() {
			fmt.Fprintf(&b, " ran %s-%s", r.Start.UTC().Format("15:04:05.000"), end(&r).UTC().Format("15:04:05.000"))
		}
		if r.Error != "" {
			fmt.Fprintf(&b, " err %q", r.Error)
		}
	}
	t.Logf("history:%s", b.String())
}

// checkLedger checks what every policy keeps in the ledger, most being
// the runs the policy lets go at once, keys the keys they may hold: no
// write refused, nor an end without its start; runs start in the order of
// their fires, each fire at most once (in the history too); at most most
// runs at once, at most one on each key, with the tokens of each key
// increasing; at most most runs in flight at the kill, the last ones. It
// returns the most runs that went at once.
func checkLedger(t *testing.T, h *overlapHistory, most int, keys ...string) int {
	t.Helper()
	for _, p := range h.problems {
		t.Error(p)
	}
	for f, rs := range h.extra {
		t.Errorf("fire %s ran more than once: %+v and %+v", f, h.ran[f], rs)
	}
	if len(h.runs) == 0 {
		t.Fatal("no run in the ledger")
	}
	fires := map[string]bool{}
	lastToken := map[string]uint64{}
	open := map[string]ledgerRun{} // by key
	peak := 0
	for i, r := range h.runs {
		if fires[r.fire] {
			t.Errorf("fire %s started more than once (again on %s, token %d)", r.fire, r.node, r.token)
		}
		fires[r.fire] = true
		if i > 0 && r.fire < h.runs[i-1].fire {
			t.Errorf("fire %s started after fire %s", r.fire, h.runs[i-1].fire)
		}
		if !slices.Contains(keys, r.key) {
			t.Errorf("fire %s ran on key %q; want one of %q", r.fire, r.key, keys)
		}
		if tok, ok := lastToken[r.key]; ok && r.token <= tok {
			t.Errorf("fire %s on key %s has token %d, not above the key's previous %d", r.fire, r.key, r.token, tok)
		}
		lastToken[r.key] = r.token
		if rec := h.ran[r.fire]; rec != nil && (rec.Token != r.token || rec.Node != r.node) {
			t.Errorf("fire %s: the ledger has its run on %s with token %d, the history on %s with token %d", r.fire, r.node, r.token, rec.Node, rec.Token)
		}
	}
	for i, e := range h.entries {
		switch e.what {
		case "start":
			if o, ok := open[e.key]; ok {
				t.Errorf("fire %s started on key %s (entry %d) while the run of fire %s held it", e.fire, e.key, i, o.fire)
			}
			open[e.key] = ledgerRun{ledgerEntry: e}
			if len(open) > most {
				t.Errorf("fire %s started (entry %d) while %d runs went; want at most %d at once", e.fire, i, len(open)-1, most)
			}
			peak = max(peak, len(open))
		case "end":
			delete(open, e.key)
		}
	}
	inFlight := 0
	for i, r := range h.runs {
		if r.end >= 0 {
			continue
		}
		inFlight++
		if i < len(h.runs)-most {
			t.Errorf("the run of fire %s on %s never ended, and is not among the last %d", r.fire, r.node, most)
		}
	}
	if inFlight > most {
		t.Errorf("%d runs in flight at the kill; want at most %d", inFlight, most)
	}
	return peak
}

// checkNodeLines checks the nodes' own lines: no ledger write was refused
// (each key's fence saw its tokens increase), and no node logged an error.
func checkNodeLines(t *testing.T, h *overlapHistory) {
	t.Helper()
	for _, l := range h.lines {
		switch {
		case l.Msg == "run start" && l.StartLedger != "":
			t.Errorf("%s: the start entry of fire %s (token %d) was refused: %s", l.Proc, l.Fire, l.Token, l.StartLedger)
		case l.Msg == "run end" && (l.Ledger != "" || l.Extend != ""):
			t.Errorf("%s: the end of fire %s (token %d): Extend %q, end entry %q; want both accepted", l.Proc, l.Fire, l.Token, l.Extend, l.Ledger)
		case l.Level == "ERROR":
			t.Errorf("%s logged an error: %s: %s", l.Proc, l.Msg, l.Err)
		}
	}
}

// checkWaited checks the fires that waited under buffer-one and
// cancel-previous: each ran once (but the last, which may still wait at
// the kill), as the next run after the one it waited for, which had ended
// in the ledger, and it started within a poll and the margin of that run's
// end; no two waited at once.
func checkWaited(t *testing.T, h *overlapHistory) {
	t.Helper()
	waited := h.bufferedFires()
	if len(waited) == 0 {
		t.Fatal("no fire waited (buffered)")
	}
	started := map[string]int{}
	for i, r := range h.runs {
		started[r.fire] = i
	}
	last := h.runs[len(h.runs)-1].fire
	for j, f := range waited {
		i, ok := started[f]
		switch {
		case !ok && (j < len(waited)-1 || f < last):
			t.Errorf("fire %s waited and never ran, though fire %s ran later", f, last)
			continue
		case !ok:
			continue // still waiting at the kill
		case i == 0:
			t.Errorf("fire %s waited, but its run is the ledger's first", f)
			continue
		}
		prev := h.runs[i-1]
		if prev.end < 0 || prev.end > h.runs[i].start {
			t.Errorf("fire %s, which waited, started (entry %d) before the run of fire %s ended (entry %d)", f, h.runs[i].start, prev.fire, prev.end)
		}
		run, before := h.ran[f], h.ran[prev.fire]
		if run == nil || before == nil {
			continue // not recorded before the kill
		}
		if run.Attempt != 1 {
			t.Errorf("the run of fire %s, which waited, is recorded as attempt %d; want 1", f, run.Attempt)
		}
		if gap := run.Start.Sub(end(before)); gap < 0 || gap > overlapPoll+overlapMargin {
			t.Errorf("fire %s, which waited, started %v after the run of fire %s ended; want within [0, %v] (a poll and the margin)",
				f, gap, prev.fire, overlapPoll+overlapMargin)
		}
		// One waits at a time: the next fire waited only once this one
		// was taken (its run starting a round trip later), at most
		// the margin after its instant.
		if j+1 < len(waited) {
			next := h.buffered[waited[j+1]].Fire
			if run.Start.After(next.Add(overlapMargin)) {
				t.Errorf("fire %s waited while fire %s still did: the latter started %v after the former's instant",
					waited[j+1], f, run.Start.Sub(next))
			}
		}
	}
}

// checkBufferOne checks a buffer-one cluster: see TestOverlapOnNodes.
func checkBufferOne(t *testing.T, h *overlapHistory) {
	checkLedger(t, h, 1, nodeLock)
	checkWaited(t, h)
	if len(h.full) == 0 {
		t.Error(`no fire was "skipped: one waiting"`)
	}
	// A fire skipped as one waited found a fire waiting: one before it
	// that had not started yet, or had (the node's knowledge of the take
	// being up to a poll old) at most a poll and the margin before.
	for _, s := range h.full {
		var waiting string
		for _, f := range h.bufferedFires() {
			r := h.buffered[f]
			run := h.ran[f]
			if r.Fire.Before(s.Fire) && (run == nil || !run.Start.Before(s.Fire.Add(-overlapPoll-overlapMargin))) {
				waiting = f
			}
		}
		if waiting == "" {
			t.Errorf("fire %s was skipped on %s as one waited, but no fire waited then", nodetest.FireString(s.Fire), s.Node)
		}
	}
	for f, r := range h.ran {
		if r.Outcome != string(scheduling.OutcomeOK) {
			t.Errorf("the run of fire %s on %s ended %q (%s); want ok", f, r.Node, r.Outcome, r.Error)
		}
	}
}

// checkCancelPrevious checks a cancel-previous cluster: see
// TestOverlapOnNodes.
func checkCancelPrevious(t *testing.T, h *overlapHistory) {
	checkLedger(t, h, 1, nodeLock)
	checkWaited(t, h)
	bound := overlapPoll + overlapMargin
	var worst, worstRemote time.Duration
	remote := 0
	var worstLocal time.Duration
	ends := map[string]nodetest.Line{} // "run end" by fire
	cancelling := map[string]string{}  // fire -> the node that logged cancelling its run
	// The index in the lines of the node's line saying that it cancels the
	// run of a fire, and of the line saying that a fire waits, by fire.
	cancelAt, waitAt := map[string]int{}, map[string]int{}
	fire := func(l nodetest.Line) string {
		at, err := time.Parse(time.RFC3339Nano, l.Fire)
		if err != nil {
			t.Errorf("%s: line %q: fire %q: %v", l.Proc, l.Msg, l.Fire, err)
		}
		return nodetest.FireString(at)
	}
	for i, l := range h.lines {
		switch l.Msg {
		case "run end":
			ends[l.Fire] = l
		case "cancelling the run of an earlier fire: a later one waits (overlap cancel-previous)":
			cancelling[fire(l)], cancelAt[fire(l)] = l.Proc, i
		case "a run of the task is going; fire waits for it":
			waitAt[fire(l)] = i
		}
	}
	for i, r := range h.runs[:len(h.runs)-1] {
		rec := h.ran[r.fire]
		if rec == nil {
			if i < len(h.runs)-2 {
				t.Errorf("the run of fire %s on %s is not in the history", r.fire, r.node)
			}
			continue
		}
		if rec.Outcome != string(scheduling.OutcomeCancelled) || !strings.Contains(rec.Error, scheduling.ErrSuperseded.Error()) {
			t.Errorf("the run of fire %s on %s ended %q (%q); want cancelled with ErrSuperseded", r.fire, rec.Node, rec.Outcome, rec.Error)
			continue
		}
		if l, ok := ends[r.fire]; !ok || l.Proc != r.node || !strings.Contains(l.Cause, scheduling.ErrSuperseded.Error()) {
			t.Errorf("the run of fire %s on %s: its run end line %+v; want one on %s with the cause ErrSuperseded", r.fire, r.node, l, r.node)
		}
		if n := cancelling[r.fire]; n != r.node {
			t.Errorf("the run of fire %s on %s was logged as cancelled by %q; want its own node", r.fire, r.node, n)
		}
		b := h.nextBuffered(r.fire)
		if b == nil {
			t.Errorf("the run of fire %s was cancelled, but no later fire waited", r.fire)
			continue
		}
		bf := nodetest.FireString(b.Fire)
		if next := h.runs[i+1].fire; next != bf {
			t.Errorf("after the cancelled run of fire %s came fire %s; want fire %s, the one that waited", r.fire, next, bf)
		}
		// The later fire waited at its instant or after: the cancel
		// came within a poll (at once when it waited on the same node)
		// and the margin of that.
		lag := end(rec).Sub(b.Fire)
		if lag < 0 || lag > bound {
			t.Errorf("the run of fire %s on %s ended %v after fire %s waited (on %s); want within [0, %v]: a poll (%v) and the margin (%v)",
				r.fire, rec.Node, lag, bf, b.Node, bound, overlapPoll, overlapMargin)
		}
		worst = max(worst, lag)
		if b.Node != rec.Node {
			remote++
			worstRemote = max(worstRemote, lag)
			continue
		}
		worstLocal = max(worstLocal, lag)
		// On the node running it, the run is cancelled at once: before
		// the node says the later fire waits (one goroutine logs both),
		// not at a later poll.
		c, okC := cancelAt[r.fire]
		w, okW := waitAt[bf]
		if !okC || !okW || c > w {
			t.Errorf("%s buffered fire %s while it ran fire %s, and cancelled that run (line %d, %v) after saying the fire waits (line %d, %v); want at once, before",
				rec.Node, bf, r.fire, c, okC, w, okW)
		}
	}
	// Which node buffers each fire is a race of the nodes' claims: a run
	// cancelled by a fire its own node buffered is checked above when it
	// happens, and not required (a run had none of 9).
	if remote == 0 {
		t.Errorf("none of %d cancelled runs was cancelled by a fire that waited on another node; want some", len(h.runs)-1)
	}
	t.Logf("cancel-previous: %d cancelled runs, %d by a fire another node buffered; slowest cancel %v after the later fire (%v from another node, %v on the same); bound %v",
		len(h.runs)-1, remote, worst, worstRemote, worstLocal, bound)
}

// checkAllow2 checks an allow:2 cluster: see TestOverlapOnNodes.
func checkAllow2(t *testing.T, h *overlapHistory) {
	slots := []string{locks.SlotKey(nodeLock, 1), locks.SlotKey(nodeLock, 2)}
	if peak := checkLedger(t, h, 2, slots...); peak != 2 {
		t.Errorf("at most %d runs went at once; want 2 at times", peak)
	}
	perSlot := map[string]int{}
	for _, r := range h.runs {
		perSlot[r.key]++
	}
	for _, k := range slots {
		if perSlot[k] == 0 {
			t.Errorf("no run on slot %s", k)
		}
	}
	if len(h.buffered) > 0 || len(h.full) > 0 {
		t.Errorf("%d fires waited and %d were skipped as one waited; want none under allow", len(h.buffered), len(h.full))
	}
	// With both slots taken a fire is skipped: some instant between the
	// first run's fire and the last's has no run.
	first := nodetest.ParseFire(t, h.runs[0].fire)
	lastFire := nodetest.ParseFire(t, h.runs[len(h.runs)-1].fire)
	if n := int(lastFire.Sub(first)/overlapPeriod) + 1; n <= len(h.runs) {
		t.Errorf("%d runs for the %d fires from %s to %s: no fire was skipped with both slots taken", len(h.runs), n, h.runs[0].fire, h.runs[len(h.runs)-1].fire)
	}
	for f, r := range h.ran {
		if r.Outcome != string(scheduling.OutcomeOK) {
			t.Errorf("the run of fire %s on %s ended %q (%s); want ok", f, r.Node, r.Outcome, r.Error)
		}
	}
}
