package scheduling

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

var calendarSeed = flag.Uint64("calendar.seed", 0, "seed of TestNextRunAgainstBruteForce; 0 picks one at random")

// propertyZones are the zones of the walk: DST of half an hour (Lord Howe),
// of two hours (Troll), at midnight (Santiago, Havana), negative in winter
// (Dublin), at odd offsets (Chatham, St John's, Adelaide), suspended for
// Ramadan (Casablanca), and zones without DST in the decade.
var propertyZones = []string{
	"Australia/Lord_Howe", "America/Santiago", "Europe/Paris", "America/New_York", "Asia/Tehran",
	"Pacific/Chatham", "Africa/Casablanca", "Asia/Kolkata", "UTC", "Pacific/Apia",
	"America/St_Johns", "Europe/London", "Australia/Adelaide", "America/Havana", "Asia/Gaza",
	"Antarctica/Troll", "Europe/Dublin", "Pacific/Auckland", "Asia/Jerusalem", "America/Nuuk",
}

// TestNextRunAgainstBruteForce compares nextRun, with calendars, bounds and
// DST policies, against a brute-force walk over every minute of 2026 to
// 2036 in 20 zones: at each UTC minute the walk reads the zone's wall clock
// and decides, from the expression's fields (read by a parser of its own)
// and the DST policy modelled on its own, whether the task fires there: a
// wall time that a spring-forward gap skips fires at the first minute after
// the gap under shift, and not under skip; a wall time that clocks fall
// back over fires at its first occurrence under once, at both under twice;
// an expression of every hour follows elapsed time (both occurrences, no
// skipped one) except in a zone of half-hour changes. It fires within the
// bounds, where no calendar of the set (Include followed) excludes the
// minute's wall clock. The cases are random from -calendar.seed (0: a
// random seed, logged).
//
// The full walk (3 cases a zone) takes 10 to 20 seconds without -race and
// minutes with it: under the race detector or -short it walks 2026 in three
// zones (8 cases a zone), a second or two. make test runs every test under
// -race only, so it runs the short walk; the full one runs with
// go test -run 'TestNextRunAgainstBruteForce' ./scheduling/.
func TestNextRunAgainstBruteForce(t *testing.T) {
	seed := *calendarSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("-calendar.seed %d", seed)
	zones, years, perZone := propertyZones, 10, 3
	if raceEnabled || testing.Short() {
		zones, years, perZone = []string{"Australia/Lord_Howe", "America/Santiago", "Europe/Paris"}, 1, 8
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(years, 0, 0)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	fires, stats := 0, &walkStats{}
	for _, zone := range zones {
		loc := mustLoc(t, zone)
		w := newZoneWalk(loc, start, end)
		w.stats = stats
		cases := make([]*propertyCase, perZone)
		for i := range cases {
			cases[i] = newPropertyCase(t, r, w, loc)
		}
		w.walk(cases)
		for _, c := range cases {
			fires += len(c.fires)
			c.compare(t, seed, zone, loc, start, end)
		}
	}
	t.Logf("%d fires agree; the walk met %+v", fires, *stats)
}

// A zoneWalk is a zone's wall clock over a span of UTC minutes, and its
// offset changes within it.
type zoneWalk struct {
	loc        *time.Location
	start, end int64 // UTC minutes since the Unix epoch
	changes    []zoneChange
	subHour    bool // a change by other than whole hours
	stats      *walkStats
}

// walkStats count what the walk met, to show that the cases reach DST
// changes, calendars and bounds.
type walkStats struct {
	again    int // fires at the second occurrence of a wall time (twice)
	once     int // matches at a second occurrence, not fired (once)
	shifted  int // fires at the end of a gap for a skipped wall time (shift)
	skipped  int // skipped wall times not fired (skip)
	outside  int // fires out of bounds
	excluded int // fires a calendar excluded
}

// A zoneChange is a change of offset at UTC minute at: wall minutes from
// (the last before it) to to (the first after it).
type zoneChange struct{ at, from, to int64 }

func newZoneWalk(loc *time.Location, start, end time.Time) *zoneWalk {
	w := &zoneWalk{loc: loc, start: start.Unix() / 60, end: end.Unix() / 60}
	for u := start; u.Before(end); {
		_, next := u.In(loc).ZoneBounds()
		if next.IsZero() || !next.Before(end) {
			break
		}
		m := next.Unix() / 60
		c := zoneChange{at: m, from: w.wallAt(m - 1), to: w.wallAt(m)}
		w.changes = append(w.changes, c)
		if (c.to-c.from-1)%60 != 0 {
			w.subHour = true
		}
		u = next
	}
	return w
}

// wallAt returns the wall-clock minute (minutes since the Unix epoch of the
// wall time read as UTC) of UTC minute u.
func (w *zoneWalk) wallAt(u int64) int64 {
	_, off := time.Unix(u*60, 0).In(w.loc).Zone()
	return u + int64(off)/60
}

// walk decides, at every UTC minute, which cases fire.
func (w *zoneWalk) walk(cases []*propertyCase) {
	prev := w.wallAt(w.start - 1)
	maxSeen := prev
	off := prev - (w.start - 1)
	next := 0 // the next change
	for u := w.start; u < w.end; u++ {
		if next < len(w.changes) && w.changes[next].at == u {
			off = w.changes[next].to - u
			next++
		}
		wall := u + off
		f := civilOf(wall)
		for _, c := range cases {
			match := c.expr.match(f)
			fire := match && (c.twice || wall > maxSeen)
			switch {
			case match && wall <= maxSeen && c.twice:
				w.stats.again++
			case match && wall <= maxSeen:
				w.stats.once++
			}
			// A spring-forward gap: the wall minutes from prev+1 to wall-1
			// never occur; under shift, one that matches fires at the
			// first instant after the gap, which is u.
			for m := prev + 1; !fire && m < wall; m++ {
				if c.expr.match(civilOf(m)) {
					if fire = !c.skip; fire {
						w.stats.shifted++
					} else {
						w.stats.skipped++
					}
				}
			}
			switch {
			case !fire:
			case !c.within(u):
				w.stats.outside++
			case c.excluded(f):
				w.stats.excluded++
			default:
				c.fires = append(c.fires, u)
			}
		}
		prev, maxSeen = wall, max(maxSeen, wall)
	}
}

// civil is a wall-clock minute's fields.
type civil struct {
	wall                      int64 // minutes since the epoch, read as UTC
	year, month, day, weekday int
	hour, minute, minuteOfDay int
	date                      int // year*10000 + month*100 + day
}

// civilOf returns the fields of wall minute m, by Howard Hinnant's
// civil_from_days rather than package time.
func civilOf(m int64) civil {
	days := m / 1440
	if m%1440 < 0 {
		days--
	}
	mod := int(m - days*1440)
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	mo := mp + 3
	if mp >= 10 {
		mo = mp - 9
	}
	y := yoe + era*400
	if mo <= 2 {
		y++
	}
	wd := int((days%7 + 11) % 7) // 1970-01-01 was a Thursday
	return civil{wall: m, year: int(y), month: int(mo), day: int(d), weekday: wd,
		hour: mod / 60, minute: mod % 60, minuteOfDay: mod, date: int(y)*10000 + int(mo)*100 + int(d)}
}

// cronFields is a 5-field expression's values, read by the test's own
// parser.
type cronFieldsT struct {
	minute, hour, dom, month, dow uint64
	domStar, dowStar              bool
}

// parseTestCron reads the expressions the generator writes: items "*",
// "v", "a-b", with "/step", comma-separated.
func parseTestCron(t *testing.T, expr string) cronFieldsT {
	f := strings.Fields(expr)
	if len(f) != 5 {
		t.Fatalf("test expression %q has %d fields", expr, len(f))
	}
	var c cronFieldsT
	field := func(s string, lo, hi int) (set uint64, star bool) {
		for _, item := range strings.Split(s, ",") {
			rng, stepS, hasStep := strings.Cut(item, "/")
			step := 1
			if hasStep {
				step, _ = strconv.Atoi(stepS)
			}
			a, b := lo, hi
			switch x, y, isRange := strings.Cut(rng, "-"); {
			case rng == "*":
				star = star || step == 1
			case isRange:
				a, _ = strconv.Atoi(x)
				b, _ = strconv.Atoi(y)
			default:
				a, _ = strconv.Atoi(rng)
				if !hasStep {
					b = a
				}
			}
			for v := a; v <= b; v += step {
				set |= 1 << v
			}
		}
		return set, star
	}
	c.minute, _ = field(f[0], 0, 59)
	c.hour, _ = field(f[1], 0, 23)
	c.dom, c.domStar = field(f[2], 1, 31)
	c.month, _ = field(f[3], 1, 12)
	c.dow, c.dowStar = field(f[4], 0, 6)
	return c
}

// match reports whether the expression matches wall minute f: with either
// day field "*", both day fields must match, else either (robfig's rule,
// as cron(8)).
func (c cronFieldsT) match(f civil) bool {
	if c.minute&(1<<f.minute) == 0 || c.hour&(1<<f.hour) == 0 || c.month&(1<<f.month) == 0 {
		return false
	}
	dom, dow := c.dom&(1<<f.day) != 0, c.dow&(1<<f.weekday) != 0
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// A testCalendar is a calendar as the test writes it, and as it reads it.
type testCalendar struct {
	cal      taskstate.Calendar
	dates    map[int]bool
	weekdays uint8
	daily    [][2]int   // minutes of the day, [start, end); wraps if start > end
	dated    [][2]int64 // wall minutes, [start, end)
	cron     []cronFieldsT
}

func (tc *testCalendar) excludes(f civil) bool {
	if tc.dates[f.date] || tc.weekdays&(1<<f.weekday) != 0 {
		return true
	}
	for _, w := range tc.daily {
		if w[0] < w[1] && f.minuteOfDay >= w[0] && f.minuteOfDay < w[1] ||
			w[0] > w[1] && (f.minuteOfDay >= w[0] || f.minuteOfDay < w[1]) {
			return true
		}
	}
	for _, w := range tc.dated {
		if f.wall >= w[0] && f.wall < w[1] {
			return true
		}
	}
	for _, c := range tc.cron {
		if c.match(f) {
			return true
		}
	}
	return false
}

// A propertyCase is one task of the walk: an expression, a DST policy,
// calendars and bounds, and the fires the walk found.
type propertyCase struct {
	exprText    string
	expr        cronFieldsT
	policy      string
	twice, skip bool // the policy as the walk applies it
	calendars   []*testCalendar
	names       []string // the calendars the task names
	set         []*testCalendar
	start, end  int64 // UTC minutes; 0: open
	fires       []int64
}

func (c *propertyCase) within(u int64) bool {
	return (c.start == 0 || u >= c.start) && (c.end == 0 || u < c.end)
}

func (c *propertyCase) excluded(f civil) bool {
	for _, tc := range c.set {
		if tc.excludes(f) {
			return true
		}
	}
	return false
}

// dstExprs are expressions that DST changes hit.
var dstExprs = []string{"30 2 * * *", "0,30 1-3 * * *", "0 0 * * *", "30 0 * * *", "45 2 * * *", "15 1 * * 0",
	"0 2 1-7 * 0", "0,15,30,45 * * * *", "0 * * * 6", "30 * * * *", "0 1 * * *", "59 23 * * *", "30 23 * * 6",
	"0,30 0-3 * * *", "15,45 2 * * *", "0 3 * * *", "0 * * * *", "*/20 0-4 * * *", "0 12 * * *"}

// genField writes a random field of values lo to hi: most often one value
// (from hot when given), else a range, a list, a step, or "*" with
// probability star.
func genField(r *rand.Rand, lo, hi int, star float64, hot []int) string {
	v := func() int {
		if len(hot) > 0 && r.IntN(2) == 0 {
			return hot[r.IntN(len(hot))]
		}
		return lo + r.IntN(hi-lo+1)
	}
	if r.Float64() < star {
		return "*"
	}
	switch r.IntN(6) {
	case 0:
		a := v()
		return fmt.Sprintf("%d-%d", a, min(hi, a+r.IntN(4)))
	case 1:
		a, b := v(), v()
		if a == b {
			return strconv.Itoa(a)
		}
		return fmt.Sprintf("%d,%d", min(a, b), max(a, b))
	case 2:
		return fmt.Sprintf("*/%d", 2+r.IntN(5))
	case 3:
		a := v()
		return fmt.Sprintf("%d-%d/%d", a, min(hi, a+6), 2+r.IntN(3))
	default:
		return strconv.Itoa(v())
	}
}

// genExpr writes a random expression, dense enough to meet DST changes
// and calendars, sparse enough to keep nextRun's calls few.
func genExpr(r *rand.Rand, w *zoneWalk) string {
	if len(w.changes) > 0 && r.IntN(5) < 2 {
		// A wall time that a change of w skips or repeats.
		ch := w.changes[r.IntN(len(w.changes))]
		var m int64
		if ch.to > ch.from+1 { // a gap: from+1 to to-1
			m = ch.from + 1 + r.Int64N(ch.to-ch.from-1)
		} else { // a repeat: to to from
			m = ch.to + r.Int64N(ch.from-ch.to+1)
		}
		f := civilOf(m)
		return fmt.Sprintf([]string{"%[1]d %[2]d * * *", "%[1]d,59 %[2]d * * *", "%[1]d %[2]d * * %[5]d", "%[1]d %[2]d %[3]d %[4]d *",
			"*/15 %[2]d * * *", "%[1]d %[2]d,12 %[3]d * *"}[r.IntN(6)], f.minute, f.hour, f.day, f.month, f.weekday)
	}
	if r.IntN(5) < 1 {
		return dstExprs[r.IntN(len(dstExprs))]
	}
	minute := genField(r, 0, 59, 0, []int{0, 15, 30, 45, 59})
	if strings.HasPrefix(minute, "*/") {
		minute = []string{"*/15", "*/30", "*/20"}[r.IntN(3)]
	}
	hour := genField(r, 0, 23, 0.2, []int{0, 1, 2, 3, 23})
	if r.IntN(20) == 0 {
		hour = "0-23" // every hour, but not "*"
	}
	return strings.Join([]string{minute, hour, genField(r, 1, 31, 0.7, []int{1, 15, 29, 30, 31}),
		genField(r, 1, 12, 0.75, []int{2, 3, 4, 9, 10, 11}), genField(r, 0, 6, 0.7, []int{0, 6})}, " ")
}

// newPropertyCase draws a case whose expression parses.
func newPropertyCase(t *testing.T, r *rand.Rand, w *zoneWalk, loc *time.Location) *propertyCase {
	c := &propertyCase{}
	for {
		c.exprText = genExpr(r, w)
		if _, err := parseSchedule(c.exprText, loc); err == nil {
			break // "0 0 30 2 *" never fires, and does not parse
		}
	}
	c.expr = parseTestCron(t, c.exprText)
	c.policy = []string{"once,shift", "once,skip", "twice,shift", "twice,skip"}[r.IntN(4)]
	c.twice, c.skip = strings.HasPrefix(c.policy, "twice"), strings.HasSuffix(c.policy, "skip")
	// A schedule of every hour follows elapsed time (option.go's DST
	// doc): each occurrence of a repeated wall time fires, a skipped one
	// does not, whatever the policy; except in a zone that changes by
	// half hours, where its wall times take the policy.
	if c.expr.hour == allHours && !w.subHour {
		c.twice, c.skip = true, true
	}
	// Calendars.
	n := r.IntN(4) // 0 to 3
	for i := range n {
		c.calendars = append(c.calendars, genCalendar(t, r, w, fmt.Sprintf("c%d", i)))
	}
	for _, tc := range c.calendars {
		if n > 1 && r.IntN(3) == 0 {
			tc.cal.Include = append(tc.cal.Include, c.calendars[r.IntN(n)].cal.Name) // itself, or a cycle, at times
		}
	}
	if n > 0 {
		c.names = []string{"c0"}
		if n > 1 && r.IntN(2) == 0 {
			c.names = append(c.names, "c1")
		}
	}
	// The set: every calendar reached from the names through Include.
	reached := map[string]bool{}
	var reach func(string)
	reach = func(name string) {
		if reached[name] {
			return
		}
		reached[name] = true
		for _, tc := range c.calendars {
			if tc.cal.Name == name {
				c.set = append(c.set, tc)
				for _, inc := range tc.cal.Include {
					reach(inc)
				}
			}
		}
	}
	for _, name := range c.names {
		reach(name)
	}
	// Bounds.
	span := w.end - w.start
	// round puts a bound on the hour at times, where fires often are.
	round := func(u int64) int64 {
		if r.IntN(2) == 0 {
			return u - u%60
		}
		return u
	}
	if r.IntN(3) == 0 {
		c.start = round(w.start + r.Int64N(span))
	}
	if r.IntN(3) == 0 {
		from := max(c.start, w.start)
		c.end = max(from+1, round(from+1+r.Int64N(w.end-from)))
	}
	return c
}

// genCalendar draws a calendar of a few rules, many of them on days and
// hours of w's DST changes.
func genCalendar(t *testing.T, r *rand.Rand, w *zoneWalk, name string) *testCalendar {
	tc := &testCalendar{cal: taskstate.Calendar{Name: name}, dates: map[int]bool{}}
	// hotWall returns a wall minute near a DST change, or anywhere.
	// On the quarter hour at times, where fires often are.
	hotWall := func() int64 {
		m := w.start + r.Int64N(w.end-w.start)
		if len(w.changes) > 0 && r.IntN(2) == 0 {
			ch := w.changes[r.IntN(len(w.changes))]
			m = ch.from + int64(r.IntN(181)) - 90
		}
		if r.IntN(2) == 0 {
			m -= m % []int64{15, 30, 60}[r.IntN(3)]
		}
		return m
	}
	wallText := func(m int64) string { return time.Unix(m*60, 0).UTC().Format("2006-01-02T15:04") }
	for range r.IntN(4) {
		f := civilOf(hotWall())
		tc.dates[f.date] = true
		tc.cal.Dates = append(tc.cal.Dates, fmt.Sprintf("%04d-%02d-%02d", f.year, f.month, f.day))
	}
	if r.IntN(4) == 0 {
		d := r.IntN(7)
		tc.weekdays |= 1 << d
		names := []string{"Sun", "monday", "TUE", "wed", "Thursday", "fri", "sat"}
		tc.cal.Weekdays = append(tc.cal.Weekdays, names[d])
	}
	for range r.IntN(3) {
		if r.IntN(2) == 0 { // daily
			a := int(civilOf(hotWall()).minuteOfDay)
			b := (a + 1 + r.IntN(600)) % 1440
			if r.IntN(3) == 0 {
				b = (a + 1440 - 1 - r.IntN(300)) % 1440 // wraps, mostly
			}
			if r.IntN(2) == 0 {
				b -= b % 30
			}
			if b == a {
				continue
			}
			end := fmt.Sprintf("%02d:%02d", b/60, b%60)
			if b == 0 {
				end = "24:00"
			}
			tc.daily = append(tc.daily, [2]int{a, b})
			tc.cal.Windows = append(tc.cal.Windows, fmt.Sprintf("%02d:%02d-%s", a/60, a%60, end))
		} else { // dated
			a := hotWall()
			b := a + 1 + r.Int64N([]int64{90, 24 * 60, 10 * 24 * 60}[r.IntN(3)])
			if r.IntN(2) == 0 {
				b = max(a+1, b-b%30)
			}
			tc.dated = append(tc.dated, [2]int64{a, b})
			tc.cal.Windows = append(tc.cal.Windows, wallText(a)+"/"+wallText(b))
		}
	}
	if r.IntN(4) == 0 {
		e := []string{"0 * * * *", "*/30 2 * * *", "* 3 * * 0", "0-29 1 * * *", "15 2 1-7 * *", "0-44 2 * * *", "* 0 * * *"}[r.IntN(7)]
		tc.cron = append(tc.cron, parseTestCron(t, e))
		tc.cal.Cron = append(tc.cal.Cron, e)
	}
	return tc
}

// compare runs nextRun over the walk's span and compares its fires with
// the walk's.
func (c *propertyCase) compare(t *testing.T, seed uint64, zone string, loc *time.Location, start, end time.Time) {
	t.Helper()
	describe := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "-calendar.seed %d, zone %s, expression %q, dst %s (walk: twice %v, skip %v), calendars %v of", seed, zone,
			c.exprText, c.policy, c.twice, c.skip, c.names)
		for _, tc := range c.calendars {
			fmt.Fprintf(&b, " %+v", tc.cal.CalendarRules)
			b.WriteString(" (" + tc.cal.Name + ")")
		}
		fmt.Fprintf(&b, ", bounds [%v, %v)", minuteTime(c.start), minuteTime(c.end))
		return b.String()
	}
	s, err := newParseCache(loc, 1).parseFor(c.exprText, "t", c.policy)
	if err != nil {
		t.Fatalf("%s: %v", describe(), err)
	}
	known, includes := map[string]*calendarRules{}, map[string][]string{}
	for _, tc := range c.calendars {
		rules, err := compileCalendar(tc.cal)
		if err != nil {
			t.Fatalf("%s: %v", describe(), err)
		}
		known[tc.cal.Name], includes[tc.cal.Name] = rules, tc.cal.Include
	}
	cs, err := resolveCalendars(c.names, known, includes)
	if err != nil {
		t.Fatalf("%s: %v", describe(), err)
	}
	b := bounds{start: minuteTime(c.start), end: minuteTime(c.end)}
	at := start.Add(-time.Nanosecond)
	for i := 0; ; i++ {
		got := nextRun(s, cs, b, loc, at, end.Sub(at))
		var want time.Time
		if i < len(c.fires) {
			want = minuteTime(c.fires[i])
		}
		if !got.Equal(want) {
			t.Fatalf("%s:\nfire %d after %v (%v): nextRun %v (%v), brute force %v (%v)", describe(), i, at.UTC(), at.In(loc),
				got.UTC(), got.In(loc), want.UTC(), want.In(loc))
		}
		if got.IsZero() {
			return
		}
		at = got
	}
}

// minuteTime returns UTC minute u as a time; zero for 0.
func minuteTime(u int64) time.Time {
	if u == 0 {
		return time.Time{}
	}
	return time.Unix(u*60, 0).UTC()
}

// TestNextRunAgainstBruteForceAtChanges walks, as
// TestNextRunAgainstBruteForce does, fixed expressions that DST changes
// hit in zones that change at midnight (Santiago, Havana), by half an hour
// (Lord Howe), by two hours (Troll), at 02:45 (Chatham) or for Ramadan
// (Casablanca): every hour on the day of a change, the hour of a change,
// and midnight. Without calendars or bounds, each under a DST policy that
// changes from zone to zone. A year in three zones under the race detector
// or -short.
func TestNextRunAgainstBruteForceAtChanges(t *testing.T) {
	zones := []string{"America/Santiago", "Australia/Lord_Howe", "Antarctica/Troll", "America/Havana", "Pacific/Chatham",
		"Africa/Casablanca", "America/New_York"}
	years := 10
	if raceEnabled || testing.Short() {
		zones, years = zones[:3], 1
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(years, 0, 0)
	exprs := []string{"0 * * * 0", "30 * * * 6", "*/30 * * * 0", "0 0 * * *", "30 0 * * 0", "0,30 1-3 * * *", "45 2 * * *",
		"0 * 5-11 9 *", "15 23 * * 6", "0-59/30 0-23 * 3,4,9,10 *"}
	for z, zone := range zones {
		loc := mustLoc(t, zone)
		w := newZoneWalk(loc, start, end)
		w.stats = &walkStats{}
		var cases []*propertyCase
		for i, e := range exprs {
			c := &propertyCase{exprText: e, expr: parseTestCron(t, e), policy: []string{"once,shift", "once,skip", "twice,shift", "twice,skip"}[(i+z)%4]}
			c.twice, c.skip = strings.HasPrefix(c.policy, "twice"), strings.HasSuffix(c.policy, "skip")
			if c.expr.hour == allHours && !w.subHour {
				c.twice, c.skip = true, true
			}
			cases = append(cases, c)
		}
		w.walk(cases)
		for _, c := range cases {
			c.compare(t, 0, zone, loc, start, end)
		}
	}
}
