package taskstate

import (
	"fmt"
	"strings"
	"time"
)

// CalendarRules are a calendar's exclusions; an instant is excluded if any
// rule excludes it, evaluated in the zone of the task that names the
// calendar. The scheduler checks each rule's syntax; [CheckCalendar] only
// the structure.
type CalendarRules struct {
	Dates    []string `json:"dates,omitempty"`    // "2026-12-25": that whole day
	Weekdays []string `json:"weekdays,omitempty"` // "sat", "sunday", case-insensitive: those whole days
	Windows  []string `json:"windows,omitempty"`  // daily "22:00-06:00" (may wrap midnight, end exclusive) or dated "2026-12-24T12:00/2026-12-27T00:00" (wall clock, end exclusive)
	Cron     []string `json:"cron,omitempty"`     // an instant whose wall-clock minute the 5-field expression matches
	Include  []string `json:"include,omitempty"`  // other calendars whose exclusions this one adds
}

// A Calendar is a named set of exclusions shared by a cluster.
type Calendar struct {
	Name string `json:"name"`
	CalendarRules
	Note    string    `json:"note,omitempty"`
	Node    string    `json:"node,omitempty"` // who created or last updated it
	Updated time.Time `json:"updated,omitzero"`
}

// MaxCalendarRules bounds the entries across a calendar's Dates, Weekdays,
// Windows, Cron and Include.
const MaxCalendarRules = 1000

// CheckCalendar validates what a store keeps of a calendar, and returns an
// error wrapping ErrInvalid that names the field, the value and the rule: a
// Name of 1 to [MaxScheduleNameLen] bytes of printable UTF-8, other than
// "." and ".."; at most [MaxCalendarRules] entries in all; no entry empty
// (an included calendar's name also as a Name). Whether each entry parses
// is the scheduler's to check.
func CheckCalendar(c Calendar) error {
	if err := checkLabel("name", c.Name); err != nil {
		return fmt.Errorf("%w: calendar: %v", ErrInvalid, err)
	}
	if c.Name == "." || c.Name == ".." {
		return fmt.Errorf("%w: calendar name %q must not be . or ..: no URL path can name it (clients remove dot segments)", ErrInvalid, c.Name)
	}
	fields := []struct {
		name    string
		entries []string
	}{{"dates", c.Dates}, {"weekdays", c.Weekdays}, {"windows", c.Windows}, {"cron", c.Cron}, {"include", c.Include}}
	n := 0
	for _, f := range fields {
		n += len(f.entries)
	}
	if n > MaxCalendarRules {
		return fmt.Errorf("%w: calendar %q has %d rules (dates, weekdays, windows, cron and include), over %d (taskstate.MaxCalendarRules)",
			ErrInvalid, c.Name, n, MaxCalendarRules)
	}
	for _, f := range fields {
		for i, v := range f.entries {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("%w: calendar %q: %s[%d] %q must not be empty", ErrInvalid, c.Name, f.name, i, v)
			}
			if f.name == "include" {
				if err := checkLabel(fmt.Sprintf("include[%d]", i), v); err != nil {
					return fmt.Errorf("%w: calendar %q: %v", ErrInvalid, c.Name, err)
				}
			}
		}
	}
	return nil
}
