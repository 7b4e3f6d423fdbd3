package docs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// failures is a testing.TB that records Errorf, to test the checks of the
// walk-through.
type failures struct {
	testing.TB
	msgs []string
}

func (f *failures) Helper() {}

func (f *failures) Errorf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

// checkSample passes an output that shows what the page's block shows, and
// fails on each way the two can part: a header, a row's key cell or its
// cells, another line, an exit status.
func TestCheckSampleFindsDifferences(t *testing.T) {
	const sample = `"T" from 2026-12-03T05:52:14Z to 2026-12-03T05:53:39.523Z: 146 ran, 30 missed
FIRE                  STATUS  NODE  DETAIL
2026-12-03T05:52:54Z  ran     a     -
2026-12-03T05:52:53Z  missed  -     -
exit 3
`
	good := []string{
		`"T" from 2026-12-03T06:00:01Z to 2026-12-03T06:01:09.1Z: 12 ran, 4 missed`,
		"FIRE                  STATUS   NODE  DETAIL",
		"2026-12-03T06:02:00Z  pending  -     -",
		"2026-12-03T06:01:59Z  ran      c     -",
		"2026-12-03T06:01:10Z  missed   -     -",
		"exit 3",
	}
	for _, c := range []struct {
		name string
		got  []string
		want string // in the first failure; empty: none
	}{
		{"alike", good, ""},
		{"another header", replace(good, 1, "FIRE  STATUS  OUTCOME  NODE  DETAIL"), "shows the header"},
		{"no missed row", slices.Delete(slices.Clone(good), 4, 5), "and the output has none like it"},
		{"a row with a cell less", replace(good, 4, "2026-12-03T06:01:10Z  missed  -"), "and the output has none like it"},
		{"another summary", replace(good, 0, `"T" from 2026-12-03T06:00:01Z to 2026-12-03T06:01:09Z: 12 ran`), "the line"},
		{"another exit status", replace(good, 5, "exit 0"), `shows "exit 3"`},
	} {
		f := &failures{TB: t}
		checkSample(f, sample, c.got, keyColumns)
		switch {
		case c.want == "" && len(f.msgs) != 0:
			t.Errorf("%s: failures %q, want none", c.name, f.msgs)
		case c.want != "" && (len(f.msgs) == 0 || !strings.Contains(f.msgs[0], c.want)):
			t.Errorf("%s: failures %q, want the first with %q", c.name, f.msgs, c.want)
		}
	}
}

func replace(lines []string, i int, s string) []string {
	out := slices.Clone(lines)
	out[i] = s
	return out
}

// The shell forms the walk-through's pages use split as a shell splits
// them.
func TestShellWords(t *testing.T) {
	for line, want := range map[string][]string{
		`redis-server --port 6390 --save '' --appendonly no &`: {"redis-server", "--port", "6390", "--save", "", "--appendonly", "no", "&"},
		`/tmp/payroll --node a --cron '@every 1s' &`:           {"/tmp/payroll", "--node", "a", "--cron", "@every 1s", "&"},
		`/tmp/ndigo audit X; echo "exit $?"`:                   {"/tmp/ndigo", "audit", "X", ";", "echo", "exit $?"},
		`curl -s 127.0.0.1:8081/metrics | grep '^ndigo_x'`:     {"curl", "-s", "127.0.0.1:8081/metrics", "|", "grep", "^ndigo_x"},
		`xdg-open http://h/#task=X   # or any browser`:         {"xdg-open", "http://h/#task=X"},
		`pkill -KILL -f -- '--node c '`:                        {"pkill", "-KILL", "-f", "--", "--node c "},
	} {
		if got := shellWords(t, line); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
}

// A section ends at the next heading of its level or above, not at a
// comment line of a fenced block, nor at a deeper heading.
func TestPageSection(t *testing.T) {
	page := "# Page\n\n## A\n\ntext\n\n```yaml\n# a comment\n```\n\n### A.1\n\nmore\n\n## B\n\nother\n"
	if got, want := pageSection(t, page, "## A"), "## A\n\ntext\n\n```yaml\n# a comment\n```\n\n### A.1\n\nmore\n\n"; got != want {
		t.Errorf("section A: %q, want %q", got, want)
	}
	if got, want := pageSection(t, page, "### A.1"), "### A.1\n\nmore\n\n"; got != want {
		t.Errorf("section A.1: %q, want %q", got, want)
	}
	if got, want := pageSection(t, page, "## B"), "## B\n\nother\n"; got != want {
		t.Errorf("section B: %q, want %q", got, want)
	}
}
