package taskstate_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

func TestInProcessConformance(t *testing.T) {
	taskstatetest.Run(t, func(t *testing.T, history int) taskstatetest.Stores {
		s, err := taskstate.NewInProcessTrail(history, taskstatetest.Trail)
		if err != nil {
			t.Fatal(err)
		}
		return taskstatetest.Stores{A: s, B: s, Loss: taskstatetest.NoWire, Trail: taskstatetest.Trail}
	})
}

func TestNewInProcessRejectsBadHistory(t *testing.T) {
	for _, n := range []int{-1, taskstate.MaxHistory + 1} {
		if _, err := taskstate.NewInProcess(n); !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("NewInProcess(%d): err = %v, want taskstate.ErrInvalid", n, err)
		}
	}
}

func TestNewInProcessTrailRejectsBadTrail(t *testing.T) {
	for _, n := range []int{-1, taskstate.MaxTrail + 1} {
		if _, err := taskstate.NewInProcessTrail(0, n); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), "trail "+strconv.Itoa(n)) {
			t.Errorf("NewInProcessTrail(0, %d): err = %v, want taskstate.ErrInvalid naming the trail", n, err)
		}
	}
}

// CutError keeps a text of at most MaxErrorLen bytes whole, and cuts a
// longer one to at most MaxErrorLen bytes, mark included, on a rune
// boundary, keeping as much of its start as fits.
func TestCutError(t *testing.T) {
	const limit = taskstate.MaxErrorLen
	for name, s := range map[string]string{
		"empty":        "",
		"at the cap":   strings.Repeat("a", limit),
		"under, runes": strings.Repeat("€", limit/3),
	} {
		if got := taskstate.CutError(s); got != s {
			t.Errorf("%s: CutError changed a %d-byte text", name, len(s))
		}
	}
	for name, s := range map[string]string{
		"one byte over":      strings.Repeat("a", limit+1),
		"3-byte runes":       strings.Repeat("€", limit),
		"2-byte runes, odd":  "x" + strings.Repeat("é", limit),
		"4-byte runes":       strings.Repeat("😀", 400),
		"not UTF-8":          strings.Repeat("\xff", 2*limit),
		"a megabyte, mixed":  strings.Repeat("a€é😀", 1<<20/10),
		"newlines and quote": strings.Repeat("line \"x\"\n", 300),
	} {
		got := taskstate.CutError(s)
		mark := "… (cut from " + strconv.Itoa(len(s)) + " bytes)"
		kept, ok := strings.CutSuffix(got, mark)
		switch {
		case len(got) > limit:
			t.Errorf("%s: CutError of %d bytes = %d bytes, want at most %d", name, len(s), len(got), limit)
		case !ok:
			t.Errorf("%s: CutError = %q, want it to end with %q", name, got, mark)
		case !strings.HasPrefix(s, kept):
			t.Errorf("%s: CutError kept %q, not the text's start", name, kept)
		case utf8.ValidString(s) && !utf8.ValidString(got):
			t.Errorf("%s: CutError of valid UTF-8 = %q, not valid UTF-8: cut inside a rune", name, got)
		case len(kept) < limit-len(mark)-3:
			t.Errorf("%s: CutError kept %d bytes, want at least %d (a rune's bytes less than what fits)", name, len(kept), limit-len(mark)-3)
		}
	}
}
