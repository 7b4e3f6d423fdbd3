package scheduling

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStopWaitsForRunsThenStopsFiring(t *testing.T) {
	s, fc, _, d := newTest(t, true)
	started := make(chan struct{}, 1)
	finish := make(chan struct{})
	var f fires
	mustAdd(t, s, NewTask(func(ctx context.Context) error {
		started <- struct{}{}
		<-finish
		return f.task(ctx)
	}, Cron("@every 1s"), Lock("k"), Name("slow")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Second)
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	<-s.loopDone // no new fires from here on
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a run was going", err)
	default:
	}
	close(finish)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if f.count() != 1 {
		t.Fatalf("%d runs completed, want 1", f.count())
	}
	fc.Advance(5 * time.Second)
	if f.count() != 1 || s.Tasks()[0].Runs != 1 {
		t.Fatalf("fired after Stop")
	}
	if _, err := d.Acquire(context.Background(), "k", time.Second); err != nil {
		t.Fatalf("lease not released by Stop: %v", err)
	}
	if err := s.Start(); err == nil {
		t.Fatalf("Start after Stop succeeded")
	}
}

func TestStopDeadlineCancelsRunsAndReleasesLeases(t *testing.T) {
	s, fc, _, d := newTest(t, true)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var cause error
	mustAdd(t, s, NewTask(func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		cause = context.Cause(ctx)
		<-release // keeps running after cancellation, holding nothing
		return ctx.Err()
	}, Cron("@every 1s"), Lock("k"), Name("stubborn")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Second)
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the stop deadline has passed
	err := s.Stop(ctx)
	if !errors.Is(err, ErrStopTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v, want ErrStopTimeout and the context's error", err)
	}
	// The lease is free at once, though the run has not returned.
	if _, err := d.Acquire(context.Background(), "k", time.Second); err != nil {
		t.Fatalf("lease still held after the stop deadline: %v", err)
	}
	close(release)
	s.mu.Lock()
	landed := s.landed
	s.mu.Unlock()
	<-landed
	if !errors.Is(cause, ErrStopTimeout) {
		t.Fatalf("run context cause %v, want ErrStopTimeout", cause)
	}
}

func TestStartDoesNotBlock(t *testing.T) {
	s, _, _, _ := newTest(t, false)
	mustAdd(t, s, NewTask(func(context.Context) error { select {} }, Cron("* * * * * *"), Name("forever")))
	done := make(chan error, 1)
	go func() { done <- s.Start() }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
}

func TestStopWithExpiredContextAndNothingRunning(t *testing.T) {
	s, fc, _, _ := newTest(t, true)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("k")))
	mustStart(t, s)
	step(t, fc, 3*time.Second, time.Second, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop with nothing running: %v", err)
	}
}
