package taskstate

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// InProcess is a Store in this process's memory: correct for the
// schedulers of one process, lost when it exits. Make one with
// [NewInProcess].
type InProcess struct {
	history int

	mu       sync.Mutex // protects the fields below
	paused   map[string]bool
	requests map[string]time.Time
	runs     map[string][]Run // oldest first, at most history each
}

var _ Store = (*InProcess)(nil)

// NewInProcess returns an empty store that keeps history runs per task (0
// means [DefaultHistory]). A history out of [0, MaxHistory] is an error
// wrapping ErrInvalid.
func NewInProcess(history int) (*InProcess, error) {
	n, err := CheckHistory("history", history)
	if err != nil {
		return nil, err
	}
	return &InProcess{history: n, paused: map[string]bool{}, requests: map[string]time.Time{},
		runs: map[string][]Run{}}, nil
}

// SetPaused sets task's paused flag.
func (s *InProcess) SetPaused(ctx context.Context, task string, paused bool) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if paused {
		s.paused[task] = true
	} else {
		delete(s.paused, task)
	}
	return nil
}

// Paused reports task's paused flag.
func (s *InProcess) Paused(ctx context.Context, task string) (bool, error) {
	if err := CheckTask(ctx, task); err != nil {
		return false, err
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

// Requests returns the pending requests.
func (s *InProcess) Requests(ctx context.Context) (map[string]time.Time, error) {
	if err := CheckContext(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests), nil
}

// TakeRequest removes task's pending request.
func (s *InProcess) TakeRequest(ctx context.Context, task string) (time.Time, bool, error) {
	if err := CheckTask(ctx, task); err != nil {
		return time.Time{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.requests[task]
	delete(s.requests, task)
	return at, ok, nil
}

// Record adds r to task's runs.
func (s *InProcess) Record(ctx context.Context, task string, r Run) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	runs := append(s.runs[task], r)
	if len(runs) > s.history {
		// A fresh slice, so that the dropped runs' array is not kept.
		runs = slices.Clone(runs[len(runs)-s.history:])
	}
	s.runs[task] = runs
	return nil
}

// Runs returns task's runs, newest first.
func (s *InProcess) Runs(ctx context.Context, task string) ([]Run, error) {
	if err := CheckTask(ctx, task); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := slices.Clone(s.runs[task])
	s.mu.Unlock()
	slices.Reverse(out)
	return out, nil
}
