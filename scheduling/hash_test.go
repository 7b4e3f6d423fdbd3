package scheduling

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// 1,000 tasks on "H * * * *" spread over the hour: no minute takes more
// than 3% of them, and every node, and a node started again, gives each
// task the same instant.
func TestHSpreadsTasksOverTheHour(t *testing.T) {
	const n = 1000
	nexts := func() []time.Time {
		s := New(Config{Clock: clockwork.NewFakeClockAt(epoch), Location: time.UTC})
		for i := range n {
			mustAdd(t, s, NewTask(func(context.Context) error { return nil }, Cron("H * * * *"), Name(fmt.Sprintf("report-%04d", i))))
		}
		var out []time.Time
		for _, ti := range s.Tasks() {
			if ti.Spec.Cron != "H * * * *" {
				t.Fatalf("spec cron %q, want the expression as written", ti.Spec.Cron)
			}
			out = append(out, ti.Next)
		}
		return out
	}
	first := nexts()
	perMinute := map[int]int{}
	for _, next := range first {
		if next.Second() != 0 || next.Sub(epoch) > time.Hour || !next.After(epoch) {
			t.Fatalf("next fire %v, want a whole minute within the hour after %v", next, epoch)
		}
		perMinute[next.Minute()]++
	}
	most := 0
	for _, c := range perMinute {
		most = max(most, c)
	}
	if len(perMinute) != 60 || most > n*3/100 {
		t.Errorf("%d minutes used, the busiest with %d tasks; want all 60, none above %d", len(perMinute), most, n*3/100)
	}
	for node := range 3 {
		if again := nexts(); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("node %d resolves other instants than the first", node)
		}
	}
}

// Each form of H resolves within its field, to the same value for the same
// name; expressions without H are left alone (THU is a day, not an H).
func TestHForms(t *testing.T) {
	for _, c := range []struct {
		expr  string
		check func(fields []string) bool
	}{
		{"H(0-29) 2 * * *", func(f []string) bool { return atoiIn(f[0], 0, 29) && f[1] == "2" }},
		{"H/15 * * * *", func(f []string) bool {
			start, rest, _ := strings.Cut(f[0], "-")
			return atoiIn(start, 0, 14) && rest == "59/15"
		}},
		{"H(10-40)/10 * * * *", func(f []string) bool {
			start, rest, _ := strings.Cut(f[0], "-")
			return atoiIn(start, 10, 19) && rest == "40/10"
		}},
		{"H H H * *", func(f []string) bool { return atoiIn(f[0], 0, 59) && atoiIn(f[1], 0, 23) && atoiIn(f[2], 1, 28) }},
		{"H H * * * *", func(f []string) bool { return atoiIn(f[0], 0, 59) && atoiIn(f[1], 0, 59) }},
		{"0 H * * MON-THU", func(f []string) bool { return atoiIn(f[1], 0, 23) && f[4] == "MON-THU" }},
		{"5,H 1 * * *", func(f []string) bool { a, b, _ := strings.Cut(f[0], ","); return a == "5" && atoiIn(b, 0, 59) }},
	} {
		for _, name := range []string{"a", "billing.Export", "report-0001"} {
			got, err := resolveH(c.expr, name)
			again, _ := resolveH(c.expr, name)
			if err != nil || got != again || !c.check(strings.Fields(got)) {
				t.Errorf("resolveH(%q, %q) = %q, %v (again %q)", c.expr, name, got, err, again)
			}
			if _, err := parseSchedule(got, time.UTC); err != nil {
				t.Errorf("%q resolves to %q, which does not parse: %v", c.expr, got, err)
			}
		}
	}
	if got, _ := resolveH("CRON_TZ=Asia/Ho_Chi_Minh H 2 * * *", "a"); !strings.HasPrefix(got, "CRON_TZ=Asia/Ho_Chi_Minh ") || hasH(strings.TrimPrefix(got, "CRON_TZ=Asia/Ho_Chi_Minh ")) {
		t.Errorf("zoned: %q, want the zone kept and H resolved", got)
	}
	for _, expr := range []string{"@hourly", "0 2 * * THU", "@every 5m"} {
		if got, err := resolveH(expr, "a"); got != expr || err != nil {
			t.Errorf("resolveH(%q) = %q, %v; want it unchanged", expr, got, err)
		}
	}
}

func atoiIn(s string, lo, hi int) bool {
	var v int
	_, err := fmt.Sscanf(s, "%d", &v)
	return err == nil && fmt.Sprint(v) == s && v >= lo && v <= hi
}

// A bad H item fails validation, naming the field, the item and the rule.
func TestHRefusesBadItems(t *testing.T) {
	for expr, want := range map[string]string{
		"H(30-70) * * * *": `minute field "H(30-70)": the range 30-70 must lie within 0-59, its start first`,
		"H(9-3) * * * *":   `minute field "H(9-3)": the range 9-3 must lie within 0-59, its start first`,
		"H/0 * * * *":      `minute field "H/0": the step after H/ must be a whole number from 1 to 60`,
		"0 H/25 * * *":     `hour field "H/25": the step after H/ must be a whole number from 1 to 24`,
		"H(1-5 * * * *":    `minute field "H(1-5": H( needs a closing parenthesis`,
		"0 0 H(1-31) * *":  `day of month field "H(1-31)": the range 1-31 must lie within 1-28`,
		"Hx * * * *":       "", // not an H item: the parser refuses it
	} {
		_, err := parseSchedule(expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseSchedule(%q) = %v, want an error containing %q", expr, err, want)
		}
	}
	s := New(Config{Clock: clockwork.NewFakeClockAt(epoch)})
	err := s.Add(NewTask(func(context.Context) error { return nil }, Cron("H(0-99) * * * *"), Name("t")))
	if err == nil || !strings.Contains(err.Error(), `option cron = "H(0-99) * * * *": must be a valid cron expression (minute field "H(0-99)": the range 0-99 must lie within 0-59`) {
		t.Errorf("Add = %v, want the problem named", err)
	}
}
