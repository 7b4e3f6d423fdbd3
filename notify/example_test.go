package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ndigo/ndigo/notify"
)

// A receiver checks each message's signature and keeps each ID once;
// Deliver retries until it answers 2xx.
func ExampleDeliver() {
	const secret = "a-long-random-string"
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify(secret, r.Header.Get(notify.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if id := r.Header.Get(notify.IdempotencyHeader); !seen[id] {
			seen[id] = true
			fmt.Printf("received %s\n", body)
		}
	}))
	defer srv.Close()

	hook := notify.Webhook{URL: srv.URL + "/hooks/ndigo", Secret: secret}
	m := notify.Message{ID: "payroll@2026-01-01T09:00:00Z/late", Task: "payroll", Event: "late",
		At: time.Date(2026, 1, 1, 9, 1, 0, 0, time.UTC), Detail: "fire 09:00 not started within 1m"}
	for range 2 { // a second sender of the same message
		if err := notify.Deliver(context.Background(), hook, m, notify.Retry{}); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// received {"id":"payroll@2026-01-01T09:00:00Z/late","task":"payroll","event":"late","at":"2026-01-01T09:01:00Z","detail":"fire 09:00 not started within 1m"}
}
