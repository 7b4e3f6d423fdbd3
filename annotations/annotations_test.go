package annotations

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

type PayrollController struct {
	_ Scheduled `method:"CloseBooks" cron:"0 2 * * *" lock:"payroll-window" lockTtl:"60s"`
	_ Scheduled `method:"SendPayslips" cron:"@every 1s" lock:"payslips" lockWait:"500" lockWaitStep:"50ms" maxRunTime:"30s" name:"payslips"`
	_ Scheduled `method:"Reconcile" cron:"CRON_TZ=Europe/Paris 0 30 1 * * *" lock:"recon" lockTtl:"1000" maxRunTime:"1m" renew:"true"`

	ran chan string
}

func (c *PayrollController) CloseBooks(context.Context) error {
	c.ran <- "close"
	return nil
}
func (c *PayrollController) SendPayslips(ctx context.Context) error {
	c.ran <- "payslips"
	return nil
}
func (c *PayrollController) Reconcile(context.Context) error { return nil }

func TestTasksReadsEveryField(t *testing.T) {
	c := &PayrollController{ran: make(chan string, 10)}
	tasks, err := Tasks(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		spec scheduling.Spec
	}{
		{"PayrollController.CloseBooks", scheduling.Spec{Cron: "0 2 * * *", Lock: "payroll-window",
			LockWaitStep: 100 * time.Millisecond, LockTTL: time.Minute}},
		{"payslips", scheduling.Spec{Cron: "@every 1s", Lock: "payslips", LockWait: 500 * time.Millisecond,
			LockWaitStep: 50 * time.Millisecond, LockTTL: time.Minute, MaxRunTime: 30 * time.Second}},
		{"PayrollController.Reconcile", scheduling.Spec{Cron: "CRON_TZ=Europe/Paris 0 30 1 * * *", Lock: "recon",
			LockWaitStep: 100 * time.Millisecond, LockTTL: time.Second, MaxRunTime: time.Minute, Renew: true}},
	}
	if len(tasks) != len(want) {
		t.Fatalf("%d tasks, want %d", len(tasks), len(want))
	}
	for i, w := range want {
		if tasks[i].Name() != w.name || tasks[i].Spec() != w.spec {
			t.Errorf("task %d: %s %+v, want %s %+v", i, tasks[i].Name(), tasks[i].Spec(), w.name, w.spec)
		}
	}
	// The tasks are bound to c.
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: locks.NewInProcessDriver(locks.WithClock(fc))})
	if err := s.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(context.Background()) }()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := fc.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	if got := <-c.ran; got != "payslips" {
		t.Fatalf("ran %s, want payslips", got)
	}
}

type Broken struct {
	_ Scheduled `method:"Missing" cron:"@daily"`
	_ Scheduled `method:"WrongSig" cron:"@daily"`
	_ Scheduled `method:"Valued" cron:"@daily"`
	_ Scheduled `method:"Fine" cron:"61 * * * *" lockTTL:"5s" lock:"k"`
	_ Scheduled `method:"Fine" cron:"@daily" lockWait:"soon" renew:"maybe" name:"fine2" maxRuntime:"1s"`
	_ Scheduled `cron:"@daily"`
	_ Scheduled `method:"Fine" cron:"@daily" name:"fine3" lock:"k" lockTtl:"1s" maxRunTime:"2s"`
	_ Scheduled `method:"Fine" cron:"@daily" timeout:"5s" name:"fine4"`
}

func (b *Broken) WrongSig() error                { return nil }
func (b Broken) Valued(context.Context) error    { return nil }
func (b *Broken) Fine(ctx context.Context) error { return nil }

func TestTasksReportsEveryProblem(t *testing.T) {
	tasks, err := Tasks(&Broken{})
	var ve *scheduling.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Tasks: %v, want a *scheduling.ValidationError", err)
	}
	if len(tasks) != 8 {
		t.Fatalf("%d tasks, want 8 (one per field, invalid ones included)", len(tasks))
	}
	msg := err.Error()
	for _, frag := range []string{
		`Broken.Missing: option method = "Missing": Broken has no method Missing; want a method Missing(ctx context.Context) error`,
		`Broken.WrongSig: option method = "WrongSig": Broken.WrongSig has signature func() error; want func(context.Context) error`,
		`Broken.Fine: option cron = "61 * * * *": must be a valid cron expression`,
		`Broken.Fine: option lockTTL = "5s": unknown tag key; did you mean "lockTtl"?`,
		`option lockWait = "soon": duration "soon": want a Go duration such as "5s" or milliseconds such as "500"`,
		`option renew = "maybe": must be "true" or "false"`,
		`option maxRuntime = "1s": unknown tag key; did you mean "maxRunTime"?`,
		`Broken.field 5: option method: is required`,
		`option maxRunTime = "2s": must not exceed lockTtl (1s) unless renew is on`,
		`option timeout = "5s": unknown tag key; known keys are method, cron`,
	} {
		if !strings.Contains(msg, frag) {
			t.Errorf("error lacks %q", frag)
		}
	}
	if t.Failed() {
		t.Log(msg)
	}
	if strings.Contains(msg, "Broken.Valued") {
		t.Errorf("a value-receiver method on a pointer controller was rejected:\n%s", msg)
	}
	// On a value, pointer-receiver methods are missing; say so.
	_, err = Tasks(Broken{})
	if err == nil || !strings.Contains(err.Error(), "Broken has method Fine only on *Broken: register a *Broken") {
		t.Errorf("Tasks(value): %v", err)
	}
}

func TestMalformedTagIsReported(t *testing.T) {
	// vet rejects a malformed tag in source, so build the type at run time.
	typ := reflect.StructOf([]reflect.StructField{
		{Name: "Pad", Type: reflect.TypeFor[int]()},
		{Name: "Bad", Type: scheduledType, Tag: `method:"Fine" cron:"@daily" bogus`},
	})
	_, err := Tasks(reflect.New(typ).Interface())
	var ve *scheduling.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("Tasks: %v, want one problem", err)
	}
	if p := ve.Problems[0]; p.Method != "field 1" || p.Option != "tag" || !strings.Contains(p.Rule, `malformed tag at key "bogus"`) {
		t.Fatalf("problem %+v", p)
	}
}

func TestTasksRejectsNonControllers(t *testing.T) {
	var nilPtr *PayrollController
	for _, c := range []any{nil, nilPtr, 42, struct{ X int }{}} {
		if _, err := Tasks(c); !errors.Is(err, ErrNoController) {
			t.Errorf("Tasks(%#v): %v, want ErrNoController", c, err)
		}
	}
}

type Reports struct {
	_ Scheduled `method:"Daily" cron:"@every 1s" lock:"reports" name:"daily"`
	_ Scheduled `method:"Weekly" cron:"@every 1s" lock:"reports" name:"weekly"`
}

func (r *Reports) Daily(context.Context) error  { return nil }
func (r *Reports) Weekly(context.Context) error { return nil }

func TestControllerRegistersInFieldOrder(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var s *scheduling.Scheduler
	app := fxtest.New(t,
		fx.Provide(func() *Reports { return &Reports{} }, func() *PayrollController { return &PayrollController{} }),
		fx.Provide(func() clockwork.Clock { return fc }),
		fx.Provide(func() locks.Driver { return locks.NewInProcessDriver(locks.WithClock(fc)) }),
		Controller[*Reports](),
		Controller[*PayrollController](),
		scheduling.Module,
		fx.Populate(&s),
	)
	app.RequireStart()
	defer app.RequireStop()
	var names []string
	for _, info := range s.Tasks() {
		names = append(names, info.Name)
	}
	want := "daily weekly PayrollController.CloseBooks payslips PayrollController.Reconcile"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("tasks %s, want %s", got, want)
	}
}

func TestControllerFailsFxNewListingAll(t *testing.T) {
	app := fx.New(fx.NopLogger,
		fx.Provide(func() *Broken { return &Broken{} }, func() *Reports { return &Reports{} }),
		Controller[*Broken](),
		Controller[*Reports](), // locked, and no driver in the graph
		scheduling.Module,
	)
	err := app.Err()
	if !errors.Is(err, scheduling.ErrInvalidSpec) {
		t.Fatalf("fx.New: %v", err)
	}
	for _, frag := range []string{"Broken.Missing", "did you mean \"lockTtl\"", "Reports.Daily (task \"daily\"): option lock = \"reports\": needs a lock driver"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("fx.New error lacks %q:\n%v", frag, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"500": 500 * time.Millisecond, "0": 0, " 5s ": 5 * time.Second, "1m30s": 90 * time.Second,
		"1.5s": 1500 * time.Millisecond, "-200": -200 * time.Millisecond, "250ms": 250 * time.Millisecond,
	}
	for in, want := range good {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "5 s", "five", "1e3", "99999999999999999999", "9223372036855", "-", "5x"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted it", in)
		}
	}
}

func TestParseTag(t *testing.T) {
	pairs, err := parseTag(`method:"A" cron:"0 2 * * *"  lock:"a \"quoted\" key"`)
	if err != nil {
		t.Fatal(err)
	}
	want := []tagPair{{"method", "A"}, {"cron", "0 2 * * *"}, {"lock", `a "quoted" key`}}
	if len(pairs) != len(want) {
		t.Fatalf("pairs %v", pairs)
	}
	for i := range want {
		if pairs[i] != want[i] {
			t.Fatalf("pairs %v, want %v", pairs, want)
		}
	}
	for _, bad := range []string{`method`, `method:`, `method:A`, `method:"A`, `:"x"`, `method:"A" method:"B"`, `a:"\q"`} {
		if _, err := parseTag(bad); err == nil {
			t.Errorf("parseTag(%q) accepted it", bad)
		}
	}
}

// Provide provides a controller from its constructor and registers its
// tasks in one call, in the same order Controller would.
func TestProvideRegistersFromConstructor(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var s *scheduling.Scheduler
	var reports *Reports
	app := fxtest.New(t,
		fx.Provide(func() clockwork.Clock { return fc }),
		fx.Provide(func() locks.Driver { return locks.NewInProcessDriver(locks.WithClock(fc)) }),
		Provide(func() (*Reports, error) { return &Reports{}, nil }),
		Provide(func(*Reports) *PayrollController { return &PayrollController{} }), // parameters from the graph
		scheduling.Module,
		fx.Populate(&s, &reports),
	)
	app.RequireStart()
	defer app.RequireStop()
	var names []string
	for _, info := range s.Tasks() {
		names = append(names, info.Name)
	}
	want := "daily weekly PayrollController.CloseBooks payslips PayrollController.Reconcile"
	if got := strings.Join(names, " "); got != want || reports == nil {
		t.Fatalf("tasks %s, want %s (controller provided: %v)", got, want, reports != nil)
	}
	for _, bad := range []any{nil, 42, func() {}, func() (*Reports, int) { return nil, 0 }} {
		if err := fx.New(fx.NopLogger, Provide(bad)).Err(); err == nil || !strings.Contains(err.Error(), "annotations.Provide") {
			t.Errorf("Provide(%T): %v", bad, err)
		}
	}
	// A value without Scheduled fields fails the app, naming it.
	err := fx.New(fx.NopLogger, Provide(func() *struct{ X int } { return &struct{ X int }{} }), scheduling.Module).Err()
	if !errors.Is(err, ErrNoController) {
		t.Errorf("Provide of a non-controller: %v", err)
	}
}

type auditBase struct{}

func (*auditBase) Audit(context.Context) error { return nil }
func (auditBase) Sweep(context.Context) error  { return nil }

// AuditController declares Run itself and gets Audit and Sweep from an
// embedded base, one level down, and Check from two levels down next to a
// shallower declaration, which wins as Go's selector rule says.
type AuditController struct {
	_ Scheduled `method:"Audit" cron:"@daily"`
	_ Scheduled `method:"Sweep" cron:"@daily"`
	_ Scheduled `method:"Run" cron:"@daily"`
	_ Scheduled `method:"Check" cron:"@daily"`
	auditBase
	*checker
	deep
}

func (*AuditController) Run(context.Context) error { return nil }

type checker struct{}

func (checker) Check(context.Context) error { return nil }

type deep struct{ innerChecker }
type innerChecker struct{}

func (innerChecker) Check(context.Context) error { return nil }
func (innerChecker) Other(context.Context) error { return nil }

// A method is named after the type that declares it in both forms, so the
// same method gets the same name (and the same claims and metric labels)
// whether a tag or a method value registers it.
func TestMethodNamesMatchInBothForms(t *testing.T) {
	c := &AuditController{checker: &checker{}}
	tasks, err := Tasks(c)
	if err != nil {
		t.Fatal(err)
	}
	builder := []scheduling.Task{
		scheduling.NewTask(c.Audit, scheduling.Cron("@daily")),
		scheduling.NewTask(c.Sweep, scheduling.Cron("@daily")),
		scheduling.NewTask(c.Run, scheduling.Cron("@daily")),
		scheduling.NewTask(c.Check, scheduling.Cron("@daily")),
	}
	want := []string{"auditBase.Audit", "auditBase.Sweep", "AuditController.Run", "checker.Check"}
	for i, task := range tasks {
		if task.Name() != want[i] || builder[i].Name() != want[i] {
			t.Errorf("task %d: tag form %q, builder form %q; want %q in both", i, task.Name(), builder[i].Name(), want[i])
		}
	}
	if got := declaringType(reflect.TypeOf(c), "Other"); got != "innerChecker" {
		t.Errorf("declaringType(Other) = %q, want innerChecker (two levels down)", got)
	}
}
