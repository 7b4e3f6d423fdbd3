package redislocks

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/taskstate"
)

var (
	//go:embed backfillstart.lua
	backfillStartSource string
	//go:embed backfilltake.lua
	backfillTakeSource string
	//go:embed backfillend.lua
	backfillEndSource string

	backfillStartScript = redis.NewScript(backfillStartSource)
	backfillTakeScript  = redis.NewScript(backfillTakeSource)
	backfillEndScript   = redis.NewScript(backfillEndSource)
)

// backfillFixed is the part of a backfill's value that does not change
// while it runs, as JSON.
type backfillFixed struct {
	ID      string    `json:"id"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Force   bool      `json:"force"`
	Overlap string    `json:"overlap,omitempty"`
	Total   int       `json:"total"`
	Node    string    `json:"node"`
	Created time.Time `json:"created"`
}

// ran returns the key of task's set of instants known to have run, in the
// namespace's slot with the backfills and the runs.
func (s *Store) ran(task string) string {
	return "ndigo:{" + s.ns + "}:ran:" + task
}

// padded is t in Unix nanoseconds, zero-padded to 20 digits, so that later
// instants compare greater as text (Lua's numbers would round them).
func padded(t time.Time) string { return fmt.Sprintf("%020d", t.UnixNano()) }

// StartBackfill makes b task's running backfill, unless another runs, and
// notes the instants that ran, in one script.
func (s *Store) StartBackfill(ctx context.Context, b taskstate.Backfill, ran []time.Time) error {
	if err := taskstate.CheckStartBackfill(ctx, b); err != nil {
		return err
	}
	fixed, err := json.Marshal(backfillFixed{ID: b.ID, From: b.From.UTC(), To: b.To.UTC(), Force: b.Force, Overlap: b.Overlap,
		Total: b.Total, Node: b.Node, Created: b.Created.UTC()})
	if err != nil {
		return fmt.Errorf("redislocks: StartBackfill of task %q: %w", b.Task, err)
	}
	args := []any{b.Task, callTTL.Milliseconds(), b.ID, padded(time.Unix(0, 0)) + " 0000000000 0000000000 r " + string(fixed),
		historyTTL.Milliseconds()}
	for _, at := range ran {
		args = append(args, padded(at))
	}
	v, err := backfillStartScript.Run(ctx, s.client, []string{s.backfills, s.call(), s.ran(b.Task)}, args...).Text()
	switch {
	case err != nil:
		return fail("StartBackfill", b.Task, err)
	case v != "":
		p, _ := readBackfill(b.Task, v)
		return fmt.Errorf("%w: task %q: backfill %s of [%v, %v] is running (%d of %d instants taken)",
			taskstate.ErrBackfillRunning, b.Task, p.ID, p.From, p.To, p.Taken+p.Refused, p.Total)
	}
	return nil
}

// TakeBackfill takes or refuses instant fire of task's backfill id and adds
// node's placeholder run, in one script.
func (s *Store) TakeBackfill(ctx context.Context, task, id, node string, fire time.Time) (taskstate.BackfillTake, error) {
	if err := taskstate.CheckTakeBackfill(ctx, task, id, node, fire); err != nil {
		return taskstate.BackfillStale, err
	}
	n, err := backfillTakeScript.Run(ctx, s.client, []string{s.backfills, s.call(), s.ran(task), s.runs(task)},
		task, callTTL.Milliseconds(), id, padded(fire), runJSON(taskstate.BackfillPlaceholder(fire, node)), s.history,
		historyTTL.Milliseconds(), taskstate.RunJSONPrefix(fire)).Int()
	if err != nil {
		return taskstate.BackfillStale, fail("TakeBackfill", task, err)
	}
	return taskstate.BackfillTake(n), nil
}

// EndBackfill ends task's running backfill id, in one script.
func (s *Store) EndBackfill(ctx context.Context, task, id, state string) (bool, error) {
	if err := taskstate.CheckEndBackfill(ctx, task, id, state); err != nil {
		return false, err
	}
	n, err := backfillEndScript.Run(ctx, s.client, []string{s.backfills, s.call()}, task, callTTL.Milliseconds(), id,
		state[:1]).Int()
	if err != nil {
		return false, fail("EndBackfill", task, err)
	}
	return n == 1, nil
}

// backfillStates maps a value's state letter to its state.
var backfillStates = map[byte]string{'r': taskstate.BackfillRunning, 'd': taskstate.BackfillDone, 'c': taskstate.BackfillCancelled}

// readBackfill reads task's value of the backfills hash: false for one
// that does not read (written by hand or another version).
func readBackfill(task, v string) (taskstate.Backfill, bool) {
	if len(v) < 46 {
		return taskstate.Backfill{}, false
	}
	cursor, err1 := strconv.ParseInt(v[:20], 10, 64)
	taken, err2 := strconv.Atoi(v[21:31])
	refused, err3 := strconv.Atoi(v[32:42])
	state, ok := backfillStates[v[43]]
	var f backfillFixed
	if err1 != nil || err2 != nil || err3 != nil || !ok || json.Unmarshal([]byte(v[45:]), &f) != nil {
		return taskstate.Backfill{}, false
	}
	b := taskstate.Backfill{ID: f.ID, Task: task, From: f.From, To: f.To, Force: f.Force, Overlap: f.Overlap, Total: f.Total, Taken: taken,
		Refused: refused, State: state, Node: f.Node, Created: f.Created}
	if cursor > 0 {
		b.Cursor = time.Unix(0, cursor).UTC()
	}
	return b, true
}
