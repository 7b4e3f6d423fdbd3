package taskstate

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// InProcess is a Store in this process's memory: correct for the
// schedulers of one process, lost when it exits. Make one with
// [NewInProcess]. Each call is applied once under one mutex, and no reply
// can be lost.
type InProcess struct {
	history int

	mu       sync.Mutex       // protects the fields below
	paused   map[string]Pause // each task's last SetPaused, resumes too
	pauses   int64            // Poll.Pauses
	requests map[string]time.Time
	retries  map[string]Retry     // the latest retry of each task, pending or taken
	taken    map[string]bool      // the task's latest retry was taken
	runs     map[string][]keptRun // oldest first, at most history each
	// backfills are each task's last backfill; ran, the instants known to
	// have run, in Unix nanoseconds.
	backfills map[string]Backfill
	ran       map[string]map[int64]bool
	// schedules are the stored schedules' encodings, by name; gen is
	// Poll.Schedules.
	schedules map[string][]byte
	gen       int64
	// takes are each task's counted runs (TakeRun).
	takes map[string]*runTakes
	// events are the trail, oldest first, at most trail; eventKeys, their
	// Keys' indexes in events plus dropped; seq, the last Seq given.
	trail     int
	events    []Event
	eventKeys map[string]int64
	seq       int64
}

// runTakes are a task's counted runs: how many were taken, and the last
// MaxRunTakes fires that took one (Unix nanoseconds) with their numbers,
// oldest first.
type runTakes struct {
	taken int
	fires []int64
	ns    []int
}

var _ Store = (*InProcess)(nil)

// NewInProcess returns an empty store that keeps history runs per task (0
// means [DefaultHistory]). A history out of [0, MaxHistory] is an error
// wrapping ErrInvalid.
func NewInProcess(history int) (*InProcess, error) {
	return NewInProcessTrail(history, 0)
}

// NewInProcessTrail returns an empty store that keeps history runs per
// task (0 means [DefaultHistory]) and the newest trail events (0 means
// [DefaultTrail]). A history out of [0, MaxHistory], a trail out of [0,
// MaxTrail], is an error wrapping ErrInvalid.
func NewInProcessTrail(history, trail int) (*InProcess, error) {
	n, err := CheckHistory("history", history)
	if err != nil {
		return nil, err
	}
	keep, err := CheckTrail("trail", trail)
	if err != nil {
		return nil, err
	}
	return &InProcess{history: n, trail: keep, eventKeys: map[string]int64{}, paused: map[string]Pause{}, requests: map[string]time.Time{},
		retries: map[string]Retry{}, taken: map[string]bool{}, runs: map[string][]keptRun{},
		backfills: map[string]Backfill{}, ran: map[string]map[int64]bool{}, schedules: map[string][]byte{},
		takes: map[string]*runTakes{}}, nil
}

// SetPaused sets task's pause.
func (s *InProcess) SetPaused(ctx context.Context, task string, p Pause) error {
	if err := CheckSetPaused(ctx, task, p); err != nil {
		return err
	}
	p.At = p.At.UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pauses++
	s.paused[task] = p
	return nil
}

// Paused returns task's pause.
func (s *InProcess) Paused(ctx context.Context, task string) (Pause, error) {
	if err := CheckTask(ctx, task); err != nil {
		return Pause{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused[task], nil
}

// RequestRun records a pending run of task, merged into one already
// pending.
func (s *InProcess) RequestRun(ctx context.Context, task string, at time.Time) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.requests[task]; !ok {
		s.requests[task] = at
	}
	return nil
}

// Poll returns the pending requests and retries, the backfills, the runs
// taken, and the generations.
func (s *InProcess) Poll(ctx context.Context) (Poll, error) {
	if err := CheckContext(ctx); err != nil {
		return Poll{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Poll{Requests: maps.Clone(s.requests), Pauses: s.pauses, Schedules: s.gen}
	if len(s.backfills) > 0 {
		p.Backfills = maps.Clone(s.backfills)
	}
	for task, rt := range s.takes {
		if p.Runs == nil {
			p.Runs = make(map[string]int, len(s.takes))
		}
		p.Runs[task] = rt.taken
	}
	for task, r := range s.retries {
		if !s.taken[task] {
			if p.Retries == nil {
				p.Retries = map[string]Retry{}
			}
			p.Retries[task] = r
		}
	}
	return p, nil
}

// TakeRequest removes task's pending request and adds node's placeholder
// run.
func (s *InProcess) TakeRequest(ctx context.Context, task, node string) (time.Time, bool, error) {
	if err := CheckTask(ctx, task); err != nil {
		return time.Time{}, false, err
	}
	if err := CheckNode(node); err != nil {
		return time.Time{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.requests[task]
	if ok {
		delete(s.requests, task)
		s.addPlaceholder(task, Run{Fire: at, Manual: true, Node: node, Outcome: OutcomeTaken})
	}
	return at, ok, nil
}

// TakeRetry removes task's pending retry if it is r and adds node's
// placeholder run.
func (s *InProcess) TakeRetry(ctx context.Context, task, node string, r Retry) (bool, error) {
	if err := CheckTakeRetry(ctx, task, node, r); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.retries[task]
	if !ok || s.taken[task] || !p.Fire.Equal(r.Fire) || p.Attempt != r.Attempt {
		return false, nil
	}
	s.taken[task] = true
	s.addPlaceholder(task, Run{Fire: p.Fire, Manual: p.Manual, Attempt: p.Attempt, Node: node, Outcome: OutcomeTaken})
	return true, nil
}

// LeaveWaiting makes r task's pending run unless another is pending or a
// later fire's was.
func (s *InProcess) LeaveWaiting(ctx context.Context, task string, r Retry) (bool, error) {
	if err := CheckLeaveWaiting(ctx, task, r); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.retries[task]
	switch {
	case ok && p.Fire.Equal(r.Fire) && p.Attempt == r.Attempt:
		return true, nil
	case ok && (!s.taken[task] || RetryLater(p, r)):
		return false, nil
	}
	s.retries[task], s.taken[task] = r, false
	return true, nil
}

// TakeRun takes the next of task's runs for fire, unless fire took one
// among the task's last takes (its number) or max were taken (0).
func (s *InProcess) TakeRun(ctx context.Context, task string, fire time.Time, max int) (int, error) {
	if err := CheckTakeRun(ctx, task, fire, max); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.takes[task]
	if rt == nil {
		rt = &runTakes{}
	}
	if i := slices.Index(rt.fires, fire.UnixNano()); i >= 0 {
		return rt.ns[i], nil
	}
	if rt.taken >= max {
		return 0, nil
	}
	rt.taken++
	rt.fires, rt.ns = append(rt.fires, fire.UnixNano()), append(rt.ns, rt.taken)
	if n := len(rt.fires) - MaxRunTakes; n > 0 {
		rt.fires, rt.ns = slices.Clone(rt.fires[n:]), slices.Clone(rt.ns[n:])
	}
	s.takes[task] = rt
	return rt.taken, nil
}

// AppendEvent appends e to the trail under the store's mutex, unless the
// trail holds an entry of its Key, which it answers.
func (s *InProcess) AppendEvent(ctx context.Context, e Event) (Event, error) {
	if err := CheckEvent(ctx, e); err != nil {
		return Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq, ok := s.eventKeys[e.Key]; ok {
		return s.events[s.eventIndex(seq)], nil
	}
	s.seq++
	e = StoredEvent(e, s.seq)
	s.events = append(s.events, e)
	s.eventKeys[e.Key] = e.Seq
	if n := len(s.events) - s.trail; n > 0 {
		for _, old := range s.events[:n] {
			delete(s.eventKeys, old.Key)
		}
		s.events = s.events[n:] // append copies the kept ones when it grows the array
	}
	return e, nil
}

// eventIndex returns the index in s.events of the entry of Seq seq, which
// it holds.
func (s *InProcess) eventIndex(seq int64) int {
	i, _ := slices.BinarySearchFunc(s.events, seq, func(e Event, seq int64) int { return cmp.Compare(e.Seq, seq) })
	return i
}

// Events returns the kept entries of Seq above after, oldest first, at
// most limit.
func (s *InProcess) Events(ctx context.Context, after int64, limit int) ([]Event, error) {
	if err := CheckEvents(ctx, after, limit); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.eventIndex(after + 1)
	out := s.events[i:min(len(s.events), i+limit)]
	if len(out) == 0 {
		return nil, nil
	}
	return slices.Clone(out), nil
}

// Record adds each run to its task's runs, in place of its placeholder if it
// is manual or a retry, and leaves the runs' retries pending. A run whose
// ID is among its task's kept runs (a caller's resend) is not added again.
func (s *InProcess) Record(ctx context.Context, runs ...TaskRun) error {
	if err := CheckRecord(ctx, runs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range runs {
		task, r := tr.Task, tr.Run
		r.Error = CutError(r.Error)
		if !s.kept(task, tr.ID) {
			if r.Manual || r.Attempt >= 1 || r.Backfill {
				runs := s.runs[task]
				for i := len(runs) - 1; i >= 0; i-- { // the newest, as the other stores
					if isPlaceholderOf(runs[i].Run, r) {
						s.runs[task] = slices.Delete(runs, i, i+1)
						break
					}
				}
			}
			s.add(task, r, tr.ID, KeepOf(s.history, tr.Keep))
		}
		if r := tr.Retry; r != nil {
			if p, ok := s.retries[task]; !ok || RetryLater(*r, p) {
				s.retries[task], s.taken[task] = *r, false
			}
		}
	}
	return nil
}

// kept reports whether a run of ID id is among task's kept runs; no ID is
// never kept. s.mu must be held.
func (s *InProcess) kept(task, id string) bool {
	return id != "" && slices.ContainsFunc(s.runs[task], func(k keptRun) bool { return k.id == id })
}

// StartBackfill makes b task's running backfill and notes the instants
// that ran.
func (s *InProcess) StartBackfill(ctx context.Context, b Backfill, ran []time.Time) error {
	if err := CheckStartBackfill(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.backfills[b.Task]; ok && p.State == BackfillRunning {
		if p.ID == b.ID {
			return nil
		}
		return fmt.Errorf("%w: task %q: backfill %s of [%v, %v] is running (%d of %d instants taken)",
			ErrBackfillRunning, b.Task, p.ID, p.From, p.To, p.Taken+p.Refused, p.Total)
	}
	b.Cursor, b.Taken, b.Refused, b.State = time.Time{}, 0, 0, BackfillRunning
	s.backfills[b.Task] = b
	for _, at := range ran {
		s.noteRan(b.Task, at)
	}
	return nil
}

// noteRan notes that task's instant at ran. s.mu must be held.
func (s *InProcess) noteRan(task string, at time.Time) {
	m := s.ran[task]
	if m == nil {
		m = map[int64]bool{}
		s.ran[task] = m
	}
	m[at.UnixNano()] = true
}

// TakeBackfill takes or refuses instant fire of task's backfill id.
func (s *InProcess) TakeBackfill(ctx context.Context, task, id, node string, fire time.Time) (BackfillTake, error) {
	if err := CheckTakeBackfill(ctx, task, id, node, fire); err != nil {
		return BackfillStale, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backfills[task]
	if !ok || b.ID != id || b.State != BackfillRunning || !fire.After(b.Cursor) {
		return BackfillStale, nil
	}
	b.Cursor = fire
	defer func() { s.backfills[task] = b }()
	if !b.Force && (s.ran[task][fire.UnixNano()] || slices.ContainsFunc(s.runs[task], func(r keptRun) bool { return RanAt(r.Run, fire) })) {
		b.Refused++
		return BackfillRefused, nil
	}
	b.Taken++
	s.noteRan(task, fire)
	s.addPlaceholder(task, BackfillPlaceholder(fire, node))
	return BackfillTaken, nil
}

// EndBackfill ends task's running backfill id.
func (s *InProcess) EndBackfill(ctx context.Context, task, id, state string) (bool, error) {
	if err := CheckEndBackfill(ctx, task, id, state); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backfills[task]
	if !ok || b.ID != id || b.State != BackfillRunning {
		return false, nil
	}
	b.State = state
	s.backfills[task] = b
	return true, nil
}

// isPlaceholderOf reports whether p is the placeholder that the take of r's
// request or retry added.
func isPlaceholderOf(p, r Run) bool {
	return p.Outcome == OutcomeTaken && p.Manual == r.Manual && p.Backfill == r.Backfill && p.Attempt == r.Attempt && p.Node == r.Node && p.Fire.Equal(r.Fire)
}

// A keptRun is a run of a task's history and the ID it was recorded with
// (TaskRun.ID; "" for none and for a placeholder).
type keptRun struct {
	Run
	id string
}

// add appends r, recorded with ID id, to task's runs and drops the oldest
// beyond keep. s.mu must be held.
func (s *InProcess) add(task string, r Run, id string, keep int) {
	runs := append(s.runs[task], keptRun{r, id})
	if len(runs) > keep {
		// A fresh slice, so that the dropped runs' array is not kept.
		runs = slices.Clone(runs[len(runs)-keep:])
	}
	s.runs[task] = runs
}

// addPlaceholder adds a take's placeholder run to task's runs, shortening
// them to no fewer than the task had (TaskRun.Keep). s.mu must be held.
func (s *InProcess) addPlaceholder(task string, r Run) {
	s.add(task, r, "", max(s.history, len(s.runs[task])))
}

// Runs returns task's newest runs, newest first.
func (s *InProcess) Runs(ctx context.Context, task string, limit int) ([]Run, error) {
	if err := CheckTask(ctx, task); err != nil {
		return nil, err
	}
	if err := CheckLimit(limit); err != nil {
		return nil, err
	}
	s.mu.Lock()
	runs := s.runs[task]
	if limit > 0 && limit < len(runs) {
		runs = runs[len(runs)-limit:]
	}
	out := make([]Run, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		out = append(out, runs[i].Run)
	}
	s.mu.Unlock()
	return out, nil
}

// CreateSchedule stores sc unless a schedule of its name is stored.
func (s *InProcess) CreateSchedule(ctx context.Context, sc Schedule) error {
	return s.putSchedule(ctx, sc, true)
}

// UpdateSchedule replaces the stored schedule of sc's name.
func (s *InProcess) UpdateSchedule(ctx context.Context, sc Schedule) error {
	return s.putSchedule(ctx, sc, false)
}

func (s *InProcess) putSchedule(ctx context.Context, sc Schedule, create bool) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	b, err := EncodeSchedule(sc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.schedules[sc.Name]
	switch {
	case create && ok:
		return fmt.Errorf("%w: %q", ErrScheduleExists, sc.Name)
	case !create && !ok:
		return fmt.Errorf("%w: %q", ErrNoSchedule, sc.Name)
	case !bytes.Equal(old, b):
		s.schedules[sc.Name] = b
		s.gen++
	}
	return nil
}

// DeleteSchedule removes the stored schedule of name.
func (s *InProcess) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := CheckScheduleName(ctx, name); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.schedules[name]; !ok {
		return false, nil
	}
	delete(s.schedules, name)
	s.gen++
	return true, nil
}

// Schedules returns the stored schedules, ordered by name.
func (s *InProcess) Schedules(ctx context.Context) ([]Schedule, error) {
	if err := CheckContext(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Schedule, 0, len(s.schedules))
	for _, name := range slices.Sorted(maps.Keys(s.schedules)) {
		sc, err := DecodeSchedule(s.schedules[name])
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// History returns how many runs per task the store keeps
// (taskstate.HistoryKeeper).
func (s *InProcess) History() int { return s.history }
