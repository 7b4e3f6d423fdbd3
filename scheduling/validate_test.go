package scheduling

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

type PayrollController struct{}

func (c *PayrollController) CloseBooks(context.Context) error { return nil }
func (c *PayrollController) Audit(context.Context) error      { return nil }

func plainJob(context.Context) error { return nil }

func TestDefaultNames(t *testing.T) {
	c := &PayrollController{}
	cases := []struct {
		task              Task
		name, typ, method string
	}{
		{NewTask(c.CloseBooks, Cron("@daily")), "PayrollController.CloseBooks", "PayrollController", "CloseBooks"},
		{NewTask(plainJob, Cron("@daily")), "scheduling.plainJob", "", "scheduling.plainJob"},
		{NewTask(c.Audit, Cron("@daily"), Name("audit")), "audit", "PayrollController", "Audit"},
		{NewTask(plainJob, origin("Ledger", "Close")), "Ledger.Close", "Ledger", "Close"},
	}
	for _, c := range cases {
		if c.task.Name() != c.name || c.task.typ != c.typ || c.task.method != c.method {
			t.Errorf("Name %q type %q method %q, want %q %q %q", c.task.Name(), c.task.typ, c.task.method, c.name, c.typ, c.method)
		}
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	c := &PayrollController{}
	s := New(Config{}) // no driver
	err := s.Add(
		NewTask(c.CloseBooks, Cron("61 * * * *"), Lock("payroll")),
		NewTask(c.Audit, LockTTL(time.Second), LockWait(-time.Second), LockWaitStep(0), Renew()),
		NewTask(plainJob, Cron("@every 1m"), Lock(""), MaxRunTime(2*time.Minute)),
		NewTask(nil, Cron("@daily"), Name("nil-func"), invalid("lockTTL", "5s", `unknown tag key; did you mean "lockTtl"?`)),
	)
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("Add: %v, want a *ValidationError wrapping ErrInvalidSpec", err)
	}
	want := []Problem{
		{Task: "PayrollController.CloseBooks", Type: "PayrollController", Method: "CloseBooks", Option: "cron", Value: "61 * * * *"},
		{Task: "PayrollController.CloseBooks", Type: "PayrollController", Method: "CloseBooks", Option: "lock", Value: "payroll"},
		{Task: "PayrollController.Audit", Type: "PayrollController", Method: "Audit", Option: "cron"},
		{Task: "PayrollController.Audit", Type: "PayrollController", Method: "Audit", Option: "lockWait", Value: "-1s"},
		{Task: "PayrollController.Audit", Type: "PayrollController", Method: "Audit", Option: "lockWaitStep", Value: "0s"},
		{Task: "PayrollController.Audit", Type: "PayrollController", Method: "Audit", Option: "lockTtl", Value: "1s"},
		{Task: "PayrollController.Audit", Type: "PayrollController", Method: "Audit", Option: "renew", Value: "true"},
		{Task: "scheduling.plainJob", Method: "scheduling.plainJob", Option: "lock"},
		{Task: "scheduling.plainJob", Method: "scheduling.plainJob", Option: "maxRunTime", Value: "2m0s"},
		{Task: "scheduling.plainJob", Method: "scheduling.plainJob", Option: "lock"},
		{Task: "nil-func", Option: "lockTTL", Value: "5s"},
		{Task: "nil-func", Option: "func"},
	}
	got := map[string]bool{}
	for _, p := range ve.Problems {
		if p.Rule == "" {
			t.Errorf("problem without a rule: %+v", p)
		}
		p.Rule = ""
		got[p.String()] = true
	}
	for _, w := range want {
		if !got[w.String()] {
			t.Errorf("missing problem %s", w)
		}
	}
	msg := err.Error()
	for _, frag := range []string{
		`PayrollController.CloseBooks: option cron = "61 * * * *": must be a valid cron expression (the minute field "61" (0-59): end of range (61) above maximum (59)`,
		`PayrollController.CloseBooks: option lock = "payroll": needs a lock driver`,
		`PayrollController.Audit: option cron: is required`,
		`PayrollController.Audit: option lockWait = "-1s": needs lock`,
		`PayrollController.Audit: option lockWaitStep = "0s": needs lock`,
		`scheduling.plainJob: option lock: must not be empty`,
		`scheduling.plainJob: option maxRunTime = "2m0s": must not exceed lockTtl (1m0s) unless renew is on`,
		`did you mean "lockTtl"?`,
		`task "nil-func": option func: must not be nil`,
	} {
		if !strings.Contains(msg, frag) {
			t.Errorf("error lacks %q:\n%s", frag, msg)
		}
	}
	if len(s.Tasks()) != 0 {
		t.Fatalf("a failed Add added tasks")
	}
}

func TestValidationRules(t *testing.T) {
	c := &PayrollController{}
	d := locks.NewInProcessDriver()
	ok := [][]Option{
		{Cron("0 2 * * *"), Lock("k"), LockTTL(time.Minute), MaxRunTime(time.Minute)},
		{Cron("0 2 * * *"), Lock("k"), LockTTL(time.Second), MaxRunTime(time.Hour), Renew()},
		{Cron("CRON_TZ=Europe/Paris 0 0 2 * * *"), Lock("k"), LockWait(0)},
		{Cron("@every 90s"), MaxRunTime(time.Hour)},
	}
	for _, opts := range ok {
		if err := New(Config{Driver: d}).Add(NewTask(c.CloseBooks, opts...)); err != nil {
			t.Errorf("valid spec rejected: %v", err)
		}
	}
	bad := map[string][]Option{
		"lockTtl":      {Cron("@daily"), Lock("k"), LockTTL(0)},
		"maxRunTime":   {Cron("@daily"), MaxRunTime(-1)},
		"lockWait":     {Cron("@daily"), LockWait(time.Second)},
		"lockWaitStep": {Cron("@daily"), LockWaitStep(time.Second)},
		"renew":        {Cron("@daily"), Renew()},
		"cron":         {Cron("0 0 30 2 *")},
	}
	for opt, opts := range bad {
		err := New(Config{Driver: d}).Add(NewTask(c.CloseBooks, opts...))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Option != opt {
			t.Errorf("%s: got %v, want one problem on %s", opt, err, opt)
		}
	}
	// Names are unique within a scheduler, also across Add calls.
	s := New(Config{})
	if err := s.Add(NewTask(c.CloseBooks, Cron("@daily"))); err != nil {
		t.Fatal(err)
	}
	err := s.Add(NewTask(c.CloseBooks, Cron("@hourly")), NewTask(c.Audit, Cron("@hourly"), Name("PayrollController.Audit2")))
	if err == nil || !strings.Contains(err.Error(), "option name = \"PayrollController.CloseBooks\": must be unique") {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := Validate(NewTask(c.CloseBooks, Cron("@daily"), Lock("k"))); err != nil {
		t.Fatalf("Validate (driver-agnostic) rejected a locked task: %v", err)
	}
}

// A func literal needs a Name: its generated name ("pkg.F.func1") changes
// when code moves, and it names the task in logs, metrics and, when
// locked, the fire claims that nodes share.
func TestFuncLiteralNeedsName(t *testing.T) {
	literal := func(context.Context) error { return nil }
	for _, task := range []Task{
		NewTask(literal, Cron("@daily"), Lock("k")),
		NewTask(literal, Cron("@daily")),
	} {
		err := Validate(task)
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Option != "name" ||
			!strings.Contains(ve.Problems[0].Rule, "func literal") || !strings.Contains(ve.Problems[0].Value, "func") {
			t.Fatalf("literal without a name: %v", err)
		}
	}
	for _, ok := range []Task{
		NewTask(literal, Cron("@daily"), Lock("k"), Name("nightly")),
		NewTask(literal, Cron("@daily"), Name("nightly")),
		NewTask((&ledger{}).Close, Cron("@daily"), Lock("k")),
		NewTask(closeBooks, Cron("@daily")),
	} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%s): %v", ok.Name(), err)
		}
	}
}

func closeBooks(context.Context) error { return nil }

type ledger struct{}

func (*ledger) Close(context.Context) error { return nil }

// An option the spec reader could not read is reported once: the rules
// that depend on it are not checked on its absence (cron is required,
// lockTtl needs a lock, and is only checked beside one), while independent
// rules still are.
func TestUnreadOptionSuppressesOnlyItsDependents(t *testing.T) {
	for _, c := range []struct {
		task Task
		want []string // options with problems, in order
	}{
		{NewTask(closeBooks, invalid("cron", "${x}", "no setting x")), []string{"cron"}},
		{NewTask(closeBooks, Cron("@daily"), invalid("lock", "${x}", "no setting x"), LockTTL(5*time.Second)), []string{"lock"}},
		{NewTask(closeBooks, invalid("lock", "${x}", "no setting x"), LockTTL(-time.Second)), []string{"lock", "cron"}},
		{NewTask(closeBooks, invalid("tag", "`x`", "malformed")), []string{"tag"}},
	} {
		err := Validate(c.task)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("Validate = %v, want a ValidationError", err)
		}
		var got []string
		for _, p := range ve.Problems {
			got = append(got, p.Option)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("problems on %v, want %v: %v", got, c.want, err)
		}
	}
}

// A lock key, or a name whose fire claim key ("@" and the name), over
// locks.MaxKeyLen is refused at Add, not at every fire, naming the option.
func TestKeyLengths(t *testing.T) {
	noop := func(context.Context) error { return nil }
	fits := strings.Repeat("k", locks.MaxKeyLen)
	if err := Validate(NewTask(noop, Cron("@daily"), Name(fits[1:]), Lock(fits))); err != nil {
		t.Fatalf("a lock key and a claim key of exactly locks.MaxKeyLen: %v", err)
	}
	for _, c := range []struct {
		task   Task
		option string
	}{
		{NewTask(noop, Cron("@daily"), Name("t"), Lock(fits+"k")), "lock"},
		{NewTask(noop, Cron("@daily"), Name(fits), Lock("k")), "name"},
	} {
		err := Validate(c.task)
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Option != c.option ||
			!strings.Contains(ve.Problems[0].Rule, "locks.MaxKeyLen") || len(ve.Problems[0].Value) > 70 {
			t.Fatalf("one byte over: %.300v, want one %s problem naming locks.MaxKeyLen, with the value cut", err, c.option)
		}
	}
	// An unlocked task claims nothing: its name may be longer.
	if err := Validate(NewTask(noop, Cron("@daily"), Name(fits))); err != nil {
		t.Fatalf("an unlocked task with a long name: %.300v", err)
	}
}

// A cron expression that a field's value breaks is refused naming the
// field and the values it takes, not only the parser's words.
func TestCronFieldErrors(t *testing.T) {
	noop := func(context.Context) error { return nil }
	for expr, want := range map[string]string{
		"61 * * * *":                  `the minute field "61" (0-59): `,
		"0 25 * * *":                  `the hour field "25" (0-23): `,
		"0 0 32 * *":                  `the day of month field "32" (1-31): `,
		"0 0 * 13 *":                  `the month field "13" (1-12 or JAN-DEC): `,
		"0 0 * * FUNDAY":              `the day of week field "FUNDAY" (0-6 or SUN-SAT): `,
		"60 0 0 * * *":                `the second field "60" (0-59): `,
		"CRON_TZ=UTC 0 0-99 * * *":    `the hour field "0-99" (0-23): `,
		"TZ=Europe/Paris */0 * * * *": `the minute field "*/0" (0-59): `,
	} {
		err := Validate(NewTask(noop, Cron(expr), Name("t")))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Cron(%q): %v; want it to name %q", expr, err, want)
		}
	}
}
