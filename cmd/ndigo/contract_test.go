package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/admin"
)

// jsonFields returns the fields of struct type t by their JSON name.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// shape is what a JSON value of type t looks like: pointers (a null the
// CLI tells from a value, such as a node without paused) do not count,
// and every number is a number.
func shape(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func kindOf(t reflect.Type) string {
	switch t = shape(t); {
	case t == reflect.TypeFor[time.Time]():
		return "time"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
		return "number"
	}
	return t.Kind().String()
}

// disagreements lists each field of the CLI's type cli that the admin
// type api lacks, or has with another shape, nested structs and slices
// included.
func disagreements(path string, cli, api reflect.Type) []string {
	cli, api = shape(cli), shape(api)
	if kindOf(cli) != kindOf(api) {
		return []string{fmt.Sprintf("%s: the CLI reads a %s (%v), the API sends a %s (%v)", path, kindOf(cli), cli, kindOf(api), api)}
	}
	switch kindOf(cli) {
	case "slice":
		return disagreements(path+"[]", cli.Elem(), api.Elem())
	case "struct":
		var out []string
		apiFields := jsonFields(api)
		for name, f := range jsonFields(cli) {
			g, ok := apiFields[name]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: the CLI reads it (%s.%s), %v has no such field", path, name, cli.Name(), f.Name, api))
				continue
			}
			out = append(out, disagreements(path+"."+name, f.Type, g.Type)...)
		}
		return out
	}
	return nil
}

// The CLI's copies of the API's types (contract.go) read only fields that
// admin's types have, by the same JSON names and shapes: a field renamed or
// retyped on one side fails here rather than decoding to nothing.
func TestContractMatchesAdmin(t *testing.T) {
	for _, c := range []struct {
		endpoint string
		cli, api reflect.Type
	}{
		{"GET /scheduledtasks", reflect.TypeFor[taskList](), reflect.TypeFor[admin.TasksJSON]()},
		{"GET /scheduledtasks/{name}/runs", reflect.TypeFor[runs](), reflect.TypeFor[admin.RunsJSON]()},
		{"GET /scheduledtasks/{name}/audit", reflect.TypeFor[audit](), reflect.TypeFor[admin.AuditJSON]()},
		{"POST /scheduledtasks/{name}/run", reflect.TypeFor[action](), reflect.TypeFor[admin.ActionJSON]()},
		{"POST /scheduledtasks/{name}/cancel-backfill", reflect.TypeFor[action](), reflect.TypeFor[admin.ActionJSON]()},
		{"POST /scheduledtasks/{name}/backfill", reflect.TypeFor[backfill](), reflect.TypeFor[admin.BackfillJSON]()},
		{"GET /schedules", reflect.TypeFor[scheduleList](), reflect.TypeFor[admin.SchedulesJSON]()},
		{"POST /schedules", reflect.TypeFor[schedule](), reflect.TypeFor[admin.ScheduleJSON]()},
		{"PUT /schedules/{name}", reflect.TypeFor[schedule](), reflect.TypeFor[admin.ScheduleJSON]()},
		{"DELETE /schedules/{name}", reflect.TypeFor[action](), reflect.TypeFor[admin.ActionJSON]()},
		{"GET /scheduledtasks/{name}/next", reflect.TypeFor[nextFires](), reflect.TypeFor[admin.NextFiresJSON]()},
		{"GET /calendars", reflect.TypeFor[calendarList](), reflect.TypeFor[admin.CalendarsJSON]()},
		{"POST /calendars", reflect.TypeFor[calendar](), reflect.TypeFor[admin.CalendarJSON]()},
		{"PUT /calendars/{name}", reflect.TypeFor[calendar](), reflect.TypeFor[admin.CalendarJSON]()},
		{"DELETE /calendars/{name}", reflect.TypeFor[calendarAction](), reflect.TypeFor[admin.CalendarActionJSON]()},
		// What the CLI sends, the handler reads.
		{"POST /scheduledtasks/{name}/backfill (body)", reflect.TypeFor[backfillRequest](), reflect.TypeFor[admin.BackfillRequestJSON]()},
		{"POST /schedules (body)", reflect.TypeFor[scheduleRequest](), reflect.TypeFor[admin.ScheduleRequestJSON]()},
		{"POST /calendars (body)", reflect.TypeFor[calendarRequest](), reflect.TypeFor[admin.CalendarRequestJSON]()},
	} {
		for _, d := range disagreements(c.endpoint, c.cli, c.api) {
			t.Error(d)
		}
	}
	// The check itself finds a field the API lacks, and one it sends in
	// another shape, nested.
	type run struct {
		Attempts int  `json:"attempts"`
		Attempt  bool `json:"attempt"`
	}
	got := disagreements("x", reflect.TypeFor[struct {
		Runs []run `json:"runs"`
	}](), reflect.TypeFor[admin.RunsJSON]())
	if len(got) != 2 {
		t.Errorf("disagreements of a renamed and a retyped field: %q, want 2", got)
	}
}
