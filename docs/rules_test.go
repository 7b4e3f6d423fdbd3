package docs_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.yaml.in/yaml/v3"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/scheduling"
)

// rulesFile is the alerting rules ndigo ships, which OPERATIONS.md shows.
const rulesFile = "ndigo-rules.yml"

// The shipped rules are valid (promtool check rules), name only series a
// node serves (its /metrics, with metrics and pings on), and fire none on
// that healthy node (promtool test rules, its scrape as the input series).
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", rulesFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	scrape := healthyScrape(t)
	served := servedNames(scrape)
	missing, err := unservedSeries(rules, served)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%s names series a node does not serve: %s", rulesFile, strings.Join(missing, "; "))
	}
	alerts := alertNames(t, rules)
	if len(alerts) == 0 {
		t.Fatalf("%s has no alert", rulesFile)
	}
	if out, err := promtoolTest(t, bin, rulesFile, scrape, alerts); err != nil {
		t.Errorf("promtool test rules on a healthy node's /metrics: %v\n%s", err, out)
	}

	// The check is not vacuous: a rule with a misspelled series is refused.
	bad := strings.Replace(string(rules), "ndigo_audit_up ==", "ndigo_audit_upp ==", 1)
	if bad == string(rules) {
		t.Fatal("the rules have no ndigo_audit_up to misspell")
	}
	if missing, err := unservedSeries([]byte(bad), served); err != nil || len(missing) != 1 || !strings.Contains(missing[0], "ndigo_audit_upp") {
		t.Errorf("rules naming ndigo_audit_upp: unserved %v, %v; want it refused", missing, err)
	}
	// And a healthy node fires none: an alert on a served series that
	// holds on it is refused too.
	firing := filepath.Join(t.TempDir(), rulesFile)
	if err := os.WriteFile(firing, []byte(strings.Replace(string(rules), "ndigo_audit_up == 0", "ndigo_audit_up == 1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := promtoolTest(t, bin, firing, scrape, alerts); err == nil {
		t.Error("promtool test rules: NdigoAuditDown on ndigo_audit_up == 1 passes; want it to fire on a healthy node")
	}
}

// OPERATIONS.md's Alerting shows the shipped rules as they are: one source
// of truth, which the page cannot drift from.
func TestAlertRulesAreThePages(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	sec := pageSection(t, readPage(t, "OPERATIONS.md"), "### Alerting")
	m := regexp.MustCompile("(?s)```yaml\n(# " + regexp.QuoteMeta(rulesFile) + ".*?)```").FindStringSubmatch(sec)
	if m == nil {
		t.Fatalf("OPERATIONS.md's Alerting shows no block starting # %s", rulesFile)
	}
	if m[1] != string(rules) {
		t.Errorf("OPERATIONS.md's Alerting block differs from %s; copy the file:\n%s", rulesFile, rules)
	}
}

// promtool returns the path of Prometheus's promtool, which make test
// installs (Debian's package prometheus).
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found in PATH: install it (Debian: sudo apt-get install --no-install-recommends prometheus; make test does)")
	}
	return bin
}

// healthyScrape starts an application with metrics on and pings to a
// local monitor, and returns its /metrics once a ping succeeded.
func healthyScrape(t *testing.T) string {
	t.Helper()
	monitor := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer monitor.Close()
	fw := app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0", Metrics: true},
		Ping: app.Ping{URL: config.Secret(monitor.URL + "/check-uuid"), Every: time.Minute, Timeout: 10 * time.Second}}
	var srv *admin.Server
	a := app.New(fx.Supply(fw), fx.Populate(&srv),
		fx.Supply(fx.Annotate(io.Discard, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name("close-books"),
				scheduling.Cron("@daily"), scheduling.Lock("close-books"))
		}))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop(context.Background()) }()
	defer http.DefaultClient.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		body := get(t, "http://"+srv.Addr()+"/metrics")
		if strings.Contains(body, "\nndigo_ping_last_success_timestamp_seconds ") {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful ping in /metrics after 30s:\n%s", body)
		}
	}
}

// servedNames returns the names of the series in a scrape (a histogram's
// _bucket, _sum and _count).
func servedNames(scrape string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(scrape, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[line[:strings.IndexAny(line, "{ ")]] = true
	}
	return names
}

// alertNames returns the alerts of a rule file.
func alertNames(t *testing.T, rules []byte) []string {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal(rules, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct{ Alert, Record, Expr string }
	}
}

// unservedSeries returns, for each rule of a rule file that names a
// series not in served, the rule and the series; recording rules' own
// series count as served to the rules after them.
func unservedSeries(rules []byte, served map[string]bool) ([]string, error) {
	var f ruleFile
	if err := yaml.Unmarshal(rules, &f); err != nil {
		return nil, err
	}
	recorded := map[string]bool{}
	var missing []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names, err := seriesNames(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("rule %s%s: %w", r.Alert, r.Record, err)
			}
			for _, n := range names {
				if !served[n] && !recorded[n] {
					missing = append(missing, fmt.Sprintf("%s%s names %s", r.Alert, r.Record, n))
				}
			}
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	return missing, nil
}

// PromQL words that are not series names where they stand: keywords, and
// the aggregations, which may be followed by by or without before their
// parenthesis.
var (
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"atan2": true, "inf": true, "nan": true}
	promqlGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
	promqlAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
		"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
		"quantile": true, "limitk": true, "limit_ratio": true}
)

// seriesNames returns the metric names a PromQL expression selects: each
// identifier that is not a function or aggregation (followed by "(", or by
// by or without), a keyword, a label in a selector's braces or a grouping
// list, or inside a string, a range or a subquery's brackets; and the
// value of a __name__="..." matcher.
func seriesNames(expr string) ([]string, error) {
	var names []string
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\n\r", rune(expr[i])) {
			i++
		}
		return i
	}
	// skipString returns the index after the string starting at i.
	skipString := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", i, expr)
	}
	// closing returns the index after the bracket that closes the one
	// opening at i, skipping strings.
	closing := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case c == open:
				depth++
			case c == close:
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unclosed %c at %d in %q", open, i, expr)
	}
	nameMatcher := regexp.MustCompile(`__name__\s*=\s*"([^"]*)"`)
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := closing(i, '{', '}')
			if err != nil {
				return nil, err
			}
			if m := nameMatcher.FindStringSubmatch(expr[i:end]); m != nil {
				names = append(names, m[1])
			}
			i = end
		case c == '[':
			end, err := closing(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration, 1e+09 and 0x1F included.
			for i++; i < len(expr) && (isIdent(expr[i]) || expr[i] == '.' ||
				(expr[i] == '+' || expr[i] == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')); i++ {
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word, next := expr[i:j], skipSpace(j)
			lower := strings.ToLower(word)
			switch {
			case promqlGrouping[lower]:
				// A list of labels follows, if any.
				if next < len(expr) && expr[next] == '(' {
					end, err := closing(next, '(', ')')
					if err != nil {
						return nil, err
					}
					j = end
				}
			case promqlKeywords[lower]:
			case next < len(expr) && expr[next] == '(':
				// A function or an aggregation.
			case promqlAggregations[lower] && next < len(expr) && isIdentStart(expr[next]):
				// sum by (l) (...): the grouping comes next.
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func TestSeriesNames(t *testing.T) {
	for expr, want := range map[string][]string{
		"ndigo_task_missed_fires > 0":                                                 {"ndigo_task_missed_fires"},
		"increase(ndigo_ping_failures_total[10m]) >= 3":                               {"ndigo_ping_failures_total"},
		`sum by (task) (rate(ndigo_task_runs_total{outcome="error"}[5m])) > 0.1`:      {"ndigo_task_runs_total"},
		"time() - ndigo_ping_last_success_timestamp_seconds > 3 * 60":                 {"ndigo_ping_last_success_timestamp_seconds"},
		`a / on (task) group_left(node) b offset 5m`:                                  {"a", "b"},
		`{__name__="ndigo_audit_up", job="x"} == 0 and max_over_time(up[5m:1m]) == 1`: {"ndigo_audit_up", "up"},
		`histogram_quantile(0.99, sum without (le) (x_bucket)) > 1e+03`:               {"x_bucket"},
		`label_replace(y, "dst", "$1", "src", "(.*)") or vector(0)`:                   {"y"},
		`absent(ndigo_backend_up{backend="locks"}) unless on() z > bool Inf`:          {"ndigo_backend_up", "z"},
	} {
		got, err := seriesNames(expr)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("seriesNames(%q) = %v, %v; want %v", expr, got, err, want)
		}
	}
	if _, err := seriesNames(`x{a="b}`); err == nil {
		t.Error("an unterminated string: no error")
	}
}

// promtoolTest runs promtool test rules on rules with the series of
// scrape as input, constant over 15 minutes, and expects no alert of
// alerts at the end.
func promtoolTest(t *testing.T, bin, rules, scrape string, alerts []string) ([]byte, error) {
	t.Helper()
	abs, err := filepath.Abs(rules)
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	}
	type alertTest struct {
		EvalTime  string     `yaml:"eval_time"`
		Alertname string     `yaml:"alertname"`
		ExpAlerts []struct{} `yaml:"exp_alerts"`
	}
	var input []series
	for line := range strings.SplitSeq(scrape, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		input = append(input, series{line[:i], strings.TrimSpace(strings.Repeat(line[i+1:]+" ", 16))})
	}
	var tests []alertTest
	for _, a := range alerts {
		tests = append(tests, alertTest{EvalTime: "15m", Alertname: a, ExpAlerts: []struct{}{}})
	}
	doc := map[string]any{
		"rule_files":          []string{abs},
		"evaluation_interval": "1m",
		"tests":               []map[string]any{{"interval": "1m", "input_series": input, "alert_rule_test": tests}},
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "test.yml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return exec.Command(bin, "test", "rules", path).CombinedOutput()
}
