package taskstate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/taskstate"
)

func TestCheckCalendar(t *testing.T) {
	ok := taskstate.Calendar{Name: "holidays", CalendarRules: taskstate.CalendarRules{Dates: []string{"2026-12-25"},
		Weekdays: []string{"sat"}, Windows: []string{"22:00-06:00"}, Cron: []string{"0 9 * * *"}, Include: []string{"fr"}}}
	if err := taskstate.CheckCalendar(ok); err != nil {
		t.Fatalf("CheckCalendar(%+v): %v", ok, err)
	}
	for _, c := range []struct {
		cal  taskstate.Calendar
		says string
	}{
		{taskstate.Calendar{}, `name "" must not be empty`},
		{taskstate.Calendar{Name: ".."}, "must not be . or .."},
		{taskstate.Calendar{Name: "a\nb"}, "printable"},
		{taskstate.Calendar{Name: strings.Repeat("x", taskstate.MaxScheduleNameLen+1)}, "over 200"},
		{taskstate.Calendar{Name: "big", CalendarRules: taskstate.CalendarRules{Dates: make([]string, 600), Cron: make([]string, 401)}},
			"has 1001 rules"},
		{taskstate.Calendar{Name: "c", CalendarRules: taskstate.CalendarRules{Windows: []string{"22:00-06:00", ""}}}, `windows[1] "" must not be empty`},
		{taskstate.Calendar{Name: "c", CalendarRules: taskstate.CalendarRules{Include: []string{"fr\t"}}}, `include[0] "fr\t" must be printable`},
	} {
		err := taskstate.CheckCalendar(c.cal)
		if !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("CheckCalendar(%.60q): %v; want ErrInvalid saying %s", c.cal.Name, err, c.says)
		}
	}
}
