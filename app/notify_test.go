package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/notify"
	"github.com/ndigo/ndigo/scheduling"
)

// With notify.webhook, a task that fails is reported "failing" to the
// webhook, signed with its secret, and the message is kept in the trail;
// none is sent after the application stopped.
func TestNotifyWhileTheSchedulerRuns(t *testing.T) {
	const secret = "a-long-random-string"
	got := make(chan notify.Message, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m notify.Message
		if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, time.Now(), 24*time.Hour); err != nil {
			t.Errorf("signature: %v", err)
		}
		if err := json.Unmarshal(body, &m); err != nil || r.Header.Get(notify.IdempotencyHeader) != m.ID {
			t.Errorf("body %s, key %q: %v", body, r.Header.Get(notify.IdempotencyHeader), err)
		}
		got <- m
	}))
	defer hook.Close()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fw := app.Framework{Node: "billing-1", Notify: app.Notify{Every: 15 * time.Second, Timeout: 10 * time.Second,
		Webhook: app.NotifyWebhook{URL: config.Secret(hook.URL + "/ndigo"), Secret: secret}}}
	var s *scheduling.Scheduler
	a := app.New(logTo(io.Discard), fx.Supply(fw), fakeClock(fc), fx.Populate(&s),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return errors.New("ledger locked") },
				scheduling.Name("close-books"), scheduling.Cron("@every 1m"))
		}))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The clock moves on by the judging period until the failed run is
	// recorded and judged.
	var m notify.Message
	for i := 0; m.ID == ""; i++ {
		if i == 100 {
			t.Fatal("no message 25 minutes after a failed run")
		}
		fc.Advance(15 * time.Second)
		select {
		case m = <-got:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if m.Task != "close-books" || m.Event != "failing" || m.Node != "billing-1" {
		t.Errorf("message %+v, want close-books failing from billing-1", m)
	}
	evs, err := s.Events(context.Background(), 0, 10)
	for i := 0; err == nil && len(evs) == 0 && i < 100; i++ { // kept after delivery
		time.Sleep(10 * time.Millisecond)
		evs, err = s.Events(context.Background(), 0, 10)
	}
	if err != nil || len(evs) != 1 || evs[0].Key != m.ID || evs[0].Action != scheduling.ActionNotify || evs[0].Actor != "ndigo" {
		t.Errorf("trail %+v, %v: want the message kept once by ndigo", evs, err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Hour)
	select {
	case m := <-got:
		t.Errorf("message %+v after the application stopped", m)
	default:
	}
}
