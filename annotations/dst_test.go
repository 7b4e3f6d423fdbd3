package annotations

import (
	"context"
	"testing"
)

type nightly struct {
	_ Scheduled `method:"Run" cron:"30 2 * * *" dst:"twice,skip"`
}

func (nightly) Run(context.Context) error { return nil }

// The dst tag sets the task's DST policy, as scheduling.DST does.
func TestDSTTag(t *testing.T) {
	tasks, err := Tasks(nightly{})
	if err != nil || len(tasks) != 1 || tasks[0].Spec().DST != "twice,skip" {
		t.Fatalf("Tasks = %v, %v; want one task with DST twice,skip", tasks, err)
	}
}
