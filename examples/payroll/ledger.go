package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// errStaleToken reports a ledger write whose lease was superseded: its
// fencing token is below the highest the ledger has accepted, or (on
// PostgreSQL) no longer the key's live token.
var errStaleToken = errors.New("payroll: ledger rejected a stale fencing token")

// A ledger is where closed payrolls are recorded. Every write is made under
// the writer's lease, and the ledger refuses the write of a holder whose
// lease a successor has superseded.
type ledger interface {
	// Append records that node closed the payroll of fire, under lease. A
	// superseded lease gets errStaleToken and records nothing.
	Append(ctx context.Context, lease locks.Lease, fire time.Time, node string) error
	// Entries returns what Append recorded, oldest first.
	Entries(ctx context.Context) ([]entry, error)
}

// An entry is one closed payroll: the fire, the node that ran it and the
// fencing token of its lease, kept so that the ledger shows which lease
// wrote what.
type entry struct {
	Fire  time.Time
	Node  string
	Token uint64
}

func (e entry) String() string {
	return fmt.Sprintf("%s %s %d", e.Fire.UTC().Format(fireFormat), e.Node, e.Token)
}

// memoryLedger is the single-node ledger.
type memoryLedger struct {
	mu      sync.Mutex // protects high and entries
	high    uint64
	entries []entry
}

func (m *memoryLedger) Append(_ context.Context, lease locks.Lease, fire time.Time, node string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	token := lease.Token()
	if token < m.high {
		return fmt.Errorf("%w: token %d, ledger at %d", errStaleToken, token, m.high)
	}
	m.high = token
	m.entries = append(m.entries, entry{Fire: fire, Node: node, Token: token})
	return nil
}

func (m *memoryLedger) Entries(context.Context) ([]entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]entry(nil), m.entries...), nil
}
