package chaos

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model rejects what a broken lock would do, and accepts what unknown
// outcomes allow.
func TestLeaseModel(t *testing.T) {
	op := func(client int, i input, o output, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: i, Output: o, Call: call, Return: ret}
	}
	acq := func(r result, token uint64) (input, output) {
		return input{Op: acquire, Key: "k"}, output{Result: r, Token: token}
	}
	never := int64(math.MaxInt64)
	a5i, a5o := acq(ok, 5)
	a6i, a6o := acq(ok, 6)
	a4i, a4o := acq(ok, 4)
	ui, uo := acq(unknown, 0)
	ni, no := acq(notAcquired, 0)
	rel := func(token uint64) input { return input{Op: release, Key: "k", Token: token} }
	ext := func(token uint64) input { return input{Op: extend, Key: "k", Token: token} }
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"two holders at once", []porcupine.Operation{op(0, a5i, a5o, 0, 1), op(1, a6i, a6o, 2, 3)}, false},
		{"token not above the last", []porcupine.Operation{op(0, a5i, a5o, 0, 1), op(0, rel(5), output{}, 2, 3), op(1, a4i, a4o, 4, 5)}, false},
		{"release by a stale holder succeeds", []porcupine.Operation{op(0, a5i, a5o, 0, 1), op(1, rel(4), output{}, 2, 3)}, false},
		{"holder told its lease is lost", []porcupine.Operation{op(0, a5i, a5o, 0, 1), op(0, ext(5), output{Result: leaseLost}, 2, 3)}, false},
		{"free key not acquired", []porcupine.Operation{op(0, ni, no, 0, 1)}, false},
		{"handoff", []porcupine.Operation{op(0, a5i, a5o, 0, 1), op(1, ni, no, 2, 3), op(0, ext(5), output{}, 4, 5),
			op(0, rel(5), output{}, 6, 7), op(1, a6i, a6o, 8, 9), op(0, rel(5), output{Result: leaseLost}, 10, 11)}, true},
		{"unknown acquire took the key", []porcupine.Operation{op(0, ui, uo, 0, never), op(1, ni, no, 2, 3)}, true},
		{"unknown acquire did not", []porcupine.Operation{op(0, ui, uo, 0, never), op(1, a5i, a5o, 2, 3)}, true},
		{"release retried after its unknown attempt took effect", []porcupine.Operation{op(0, a5i, a5o, 0, 1),
			op(0, rel(5), output{Result: unknown}, 2, 3), op(1, a6i, a6o, 4, 5), op(0, rel(5), output{}, 6, 7)}, true},
		{"release succeeds after an unknown attempt that did not", []porcupine.Operation{op(0, a5i, a5o, 0, 1),
			op(0, rel(5), output{Result: unknown}, 2, 3), op(0, rel(5), output{}, 4, 5), op(1, a6i, a6o, 6, 7)}, true},
		{"release of a lease released by nobody succeeds", []porcupine.Operation{op(0, a5i, a5o, 0, 1),
			op(0, rel(5), output{}, 2, 3), op(1, a6i, a6o, 4, 5), op(1, rel(4), output{}, 6, 7)}, false},
		{"unknown release took effect later", []porcupine.Operation{op(0, a5i, a5o, 0, 1), op(0, rel(5), output{Result: unknown}, 2, never),
			op(1, ni, no, 3, 4), op(1, a6i, a6o, 5, 6)}, true},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(leaseModel.ToModel(), c.ops); got != c.want {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.want)
		}
	}
}
