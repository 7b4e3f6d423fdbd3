package taskstate_test

import (
	"errors"
	"testing"

	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

func TestInProcessConformance(t *testing.T) {
	taskstatetest.Run(t, func(t *testing.T, history int) (taskstate.Store, taskstate.Store) {
		s, err := taskstate.NewInProcess(history)
		if err != nil {
			t.Fatal(err)
		}
		return s, s
	})
}

func TestNewInProcessRejectsBadHistory(t *testing.T) {
	for _, n := range []int{-1, taskstate.MaxHistory + 1} {
		if _, err := taskstate.NewInProcess(n); !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("NewInProcess(%d): err = %v, want taskstate.ErrInvalid", n, err)
		}
	}
}
