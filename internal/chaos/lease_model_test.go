package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The sequential lease model the linearizability check holds histories to.
//
// One key's state is who holds it, the highest token handed out and the
// leases released by their holders (a retried Release of one answers nil
// again). TTLs in the recorded histories are an hour, far beyond a run, so
// leases never expire and expiry is not modelled. An operation that failed with a Redis
// error (a timeout while Redis was paused) has an unknown outcome: Redis may
// still run it, even after the caller gave up, so it returns "never" in the
// history and the model lets it take effect or not. An Acquire that took
// effect unseen leaves the key held by a holder nobody knows (ghost) for the
// rest of the history; the recorder moves on to fresh keys at every fault.

type opKind uint8

const (
	acquire opKind = iota
	extend
	release
)

type result uint8

const (
	ok          result = iota // Acquire returned a lease; Extend or Release returned nil
	notAcquired               // ErrNotAcquired
	leaseLost                 // ErrLeaseLost
	unknown                   // any other error: the outcome is unknown
)

// An input is one call: the key, and for Extend and Release the token of the
// caller's lease.
type input struct {
	Op    opKind
	Key   string
	Token uint64
}

// An output is what the call returned: for a successful Acquire, the token.
type output struct {
	Result result
	Token  uint64
}

// ghost is the holder of a key taken by an Acquire whose caller never saw
// the lease.
const ghost = ^uint64(0)

// leaseState is one key's state.
type leaseState struct {
	holder uint64 // the holder's token; 0 when free
	last   uint64 // the highest token handed out
	// freed lists the tokens of the last leases that their holders
	// released, newest first, as the Redis driver's tombstone keeps them: a
	// Release of one of them answers nil again (a retry whose earlier
	// attempt took effect). A string keeps the state comparable.
	freed string
}

// tombstoneLen is how many released leases the driver's tombstone names.
const tombstoneLen = 8

// free returns s with its holder's lease released by the holder.
func (s leaseState) free() leaseState {
	ids := append([]string{strconv.FormatUint(s.holder, 10)}, strings.Fields(s.freed)...)
	return leaseState{last: s.last, freed: strings.Join(ids[:min(len(ids), tombstoneLen)], " ")}
}

// wasFreed reports whether the lease of token was released by its holder.
func (s leaseState) wasFreed(token uint64) bool {
	return slices.Contains(strings.Fields(s.freed), strconv.FormatUint(token, 10))
}

// step returns the states the key can be in after the call, none if the
// call's result is impossible from s.
func step(s leaseState, in input, out output) []leaseState {
	held := s.holder != 0
	mine := held && s.holder == in.Token
	switch in.Op {
	case acquire:
		switch out.Result {
		case ok: // tokens only go up
			if !held && out.Token > s.last {
				return []leaseState{{holder: out.Token, last: out.Token, freed: s.freed}}
			}
		case notAcquired:
			if held {
				return []leaseState{s}
			}
		case unknown:
			if !held {
				return []leaseState{s, {holder: ghost, last: s.last, freed: s.freed}}
			}
			return []leaseState{s}
		}
	case extend: // extending an hour-long lease changes nothing observable
		switch out.Result {
		case ok:
			if mine {
				return []leaseState{s}
			}
		case leaseLost:
			if !mine {
				return []leaseState{s}
			}
		case unknown:
			return []leaseState{s}
		}
	case release:
		switch out.Result {
		case ok:
			if mine {
				return []leaseState{s.free()}
			}
			if s.wasFreed(in.Token) { // an earlier attempt released it
				return []leaseState{s}
			}
		case leaseLost: // also once the tombstone forgot a released lease
			if !mine {
				return []leaseState{s}
			}
		case unknown:
			if mine {
				return []leaseState{s, s.free()}
			}
			return []leaseState{s}
		}
	}
	return nil
}

// leaseModel checks each key on its own: keys are independent.
var leaseModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).Key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{leaseState{}} },
	Step: func(state, in, out any) []any {
		var next []any
		for _, s := range step(state.(leaseState), in.(input), out.(output)) {
			next = append(next, s)
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(leaseState) == b.(leaseState) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		name := [...]string{"acquire", "extend", "release"}[i.Op]
		res := [...]string{"ok", "not acquired", "lease lost", "unknown"}[o.Result]
		if i.Op == acquire {
			return fmt.Sprintf("%s(%s) -> %s %d", name, i.Key, res, o.Token)
		}
		return fmt.Sprintf("%s(%s, %d) -> %s", name, i.Key, i.Token, res)
	},
	DescribeState: func(s any) string {
		st := s.(leaseState)
		if st.holder == ghost {
			return fmt.Sprintf("held by an unseen acquire, last %d", st.last)
		}
		return fmt.Sprintf("holder %d, last %d, released by their holders %q", st.holder, st.last, st.freed)
	},
}
