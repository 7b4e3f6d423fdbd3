package scheduling

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"

	"github.com/ndigo/ndigo/internal/didyoumean"
)

// A schedule computes fire instants. Next returns the first instant strictly
// after t, or the zero time if there is none.
type schedule interface {
	Next(t time.Time) time.Time
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allHours is the bit set of a cron hour field that names every hour.
const allHours = 1<<24 - 1

// descriptors are the named schedules an expression may start with.
var descriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every", "@at"}

// descriptorHint returns body with its first word replaced by the
// descriptor it most likely misspells ("every 5s": "@every 5s"; "@dayly":
// "@daily"), or "" when it is no near miss of one.
func descriptorHint(body string) string {
	first, rest, _ := strings.Cut(body, " ")
	word := first
	if !strings.HasPrefix(word, "@") {
		word = "@" + word
	}
	best := didyoumean.Closest(word, descriptors)
	if best == "" || best == first || !strings.ContainsFunc(word, unicode.IsLetter) {
		return ""
	}
	// "@at" is two edits from any two-character word ("@61"): it is the
	// hint only before what looks like a date.
	if r := strings.TrimSpace(rest); best == "@at" && (len(r) < 10 || r[4] != '-') {
		return ""
	}
	if rest = strings.TrimSpace(rest); rest != "" {
		return best + " " + rest
	}
	return best
}

// parseSchedule parses a cron expression. loc is the zone of an expression
// without a TZ= or CRON_TZ= prefix; nil means time.Local. Besides cron
// fields and robfig's descriptors it reads "@every D" (every D on a grid
// from the Unix epoch) and "@at INSTANT [ZONE]", which fires once (see
// parseAt).
func parseSchedule(expr string, loc *time.Location) (s schedule, err error) {
	defer func() {
		// robfig/cron has panicked on malformed input before; a bad spec
		// must be an error, never a crash.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("unparsable: %v", r)
		}
	}()
	body := strings.TrimSpace(expr)
	zoned := strings.HasPrefix(body, "TZ=") || strings.HasPrefix(body, "CRON_TZ=")
	if zoned {
		i := strings.IndexAny(body, " \t")
		if i < 0 {
			return nil, fmt.Errorf("a zone prefix must be followed by a schedule")
		}
		zone, err := time.LoadLocation(body[strings.IndexByte(body, '=')+1 : i])
		if err != nil {
			return nil, err
		}
		loc = zone
		body = strings.TrimSpace(body[i:])
	}
	if rest, ok := strings.CutPrefix(body, "@at"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		return parseAt(rest, loc)
	}
	if rest, ok := strings.CutPrefix(body, "@every"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every needs a duration such as 5m: %w", err)
		}
		if d < time.Millisecond {
			return nil, fmt.Errorf("@every %v: the interval must be at least 1ms", d)
		}
		return gridSchedule{every: d}, nil
	}
	if body == "" {
		return nil, fmt.Errorf("empty expression")
	}
	// H items are checked here with any seed: the task's own resolves
	// them in parseFor.
	if expr, err = resolveH(expr, ""); err != nil {
		return nil, err
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		if hint := descriptorHint(body); hint != "" {
			return nil, fmt.Errorf("%w; did you mean %q?", err, hint)
		}
		return nil, fieldError(expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unsupported schedule %T", parsed)
	}
	if !zoned && loc != nil {
		spec.Location = loc
	}
	utc := *spec
	utc.Location = time.UTC
	switch {
	case fixedZone(spec.Location):
		s = &utcSchedule{spec: utc, loc: spec.Location}
	case spec.Hour&allHours == allHours && !subHourChanges(spec.Location):
		s = spec
	default:
		s = &wallSchedule{utc: utc, loc: spec.Location}
	}
	if field := emptyField(spec); field != "" {
		return nil, fmt.Errorf("the %s field names no value (an empty list such as \",\"), so the expression never fires", field)
	}
	if !canFire(spec) {
		return nil, fmt.Errorf("the expression never fires: no month it names has the days it names")
	}
	return s, nil
}

// cronFields name the fields of a cron expression of six fields, with the
// values each takes; one of five has no seconds.
var cronFields = []struct{ name, values string }{
	{"second", "0-59"}, {"minute", "0-59"}, {"hour", "0-23"}, {"day of month", "1-31"},
	{"month", "1-12 or JAN-DEC"}, {"day of week", "0-6 or SUN-SAT"},
}

// fieldError names the field of expr that the parser refused with err, and
// the values it takes: robfig/cron says what is wrong ("end of range (61)
// above maximum (59)"), not where.
func fieldError(expr string, err error) error {
	f := strings.Fields(expr)
	if len(f) > 0 && (strings.HasPrefix(f[0], "TZ=") || strings.HasPrefix(f[0], "CRON_TZ=")) {
		f = f[1:]
	}
	names := cronFields
	switch len(f) {
	case 5:
		names = names[1:]
	case 6:
	default:
		return err
	}
	for i := range f {
		probe := slices.Repeat([]string{"*"}, len(f))
		probe[i] = f[i]
		if _, perr := cronParser.Parse(strings.Join(probe, " ")); perr != nil {
			return fmt.Errorf("the %s field %q (%s): %w", names[i].name, f[i], names[i].values, perr)
		}
	}
	return err
}

// emptyField returns the name of a field of spec that names no value, which
// robfig accepts from a list of empty items such as ",", or "".
func emptyField(spec *cron.SpecSchedule) string {
	const star = 1 << 63
	for _, f := range []struct {
		name string
		bits uint64
	}{
		{"second", spec.Second}, {"minute", spec.Minute}, {"hour", spec.Hour},
		{"day of month", spec.Dom}, {"month", spec.Month}, {"day of week", spec.Dow},
	} {
		if f.bits&^star == 0 {
			return f.name
		}
	}
	return ""
}

// daysIn is the most days each month can have (February in leap years).
var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// canFire reports whether spec fires at all. Only a day of month that no
// named month has (30 2 means February 30) makes it never fire: robfig
// requires both day fields to match when either is "*", and either one
// otherwise, and a restricted day of week always matches some day.
func canFire(spec *cron.SpecSchedule) bool {
	const star = 1 << 63
	if spec.Dom&star != 0 || spec.Dow&star == 0 {
		return true
	}
	for m := 1; m <= 12; m++ {
		if spec.Month&(1<<m) == 0 {
			continue
		}
		for d := 1; d <= daysIn[m]; d++ {
			if spec.Dom&(1<<d) != 0 {
				return true
			}
		}
	}
	return false
}

// gridSchedule fires at every multiple of every since the Unix epoch, so
// that all nodes compute the same instants whenever they started.
type gridSchedule struct {
	every time.Duration
}

func (g gridSchedule) Next(t time.Time) time.Time {
	n, d := t.UnixNano(), int64(g.every)
	q := n / d
	if n%d < 0 {
		q--
	}
	return time.Unix(0, (q+1)*d).In(t.Location())
}

// wallSchedule evaluates a cron spec on the wall clock of loc. By default
// each wall time fires once across DST changes: at its first occurrence
// when clocks fall back, at the end of the gap when they spring forward
// (the DST policy "once,shift"); twice and skip choose otherwise.
type wallSchedule struct {
	utc cron.SpecSchedule // the spec evaluated in UTC, which has no DST
	loc *time.Location
	// twice fires a wall time that clocks fall back over at both of its
	// occurrences; skip does not fire a wall time that a spring-forward
	// gap skips.
	twice, skip bool
}

func (w *wallSchedule) Next(t time.Time) time.Time {
	lt := t.In(w.loc)
	wall := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), lt.Nanosecond(), time.UTC)
	// Under twice, the wall times that clocks are about to fall back over
	// come again after t, the earlier ones among them too (01:30 when t is
	// 01:45 of the first pass), and a later wall time can occur before an
	// earlier one (01:45 of the first pass before 01:15 of the second): the
	// search starts that far back, and keeps the earliest instant after t
	// among the wall times within that much of the first found. Without
	// twice, wall times occur in their order.
	var back time.Duration
	if w.twice {
		back = fallBack(lt)
		wall = wall.Add(-back - time.Second)
	}
	var best, bestWall time.Time
	// Candidates before t occur only for wall times repeated by a fall-back
	// or within back of t's: a few hours of them at most.
	for range 4000 + int(2*back/time.Second) {
		wall = nextUTC(&w.utc, wall)
		if wall.IsZero() || (!best.IsZero() && wall.Sub(bestWall) > back) {
			break
		}
		if !w.twice && !w.skip {
			if c := wallInstant(wall, w.loc); c.After(t) {
				return c
			}
			continue
		}
		occ := wallOccurrences(wall, w.loc)
		if len(occ) == 0 { // in a spring-forward gap
			if w.skip {
				continue
			}
			occ = []time.Time{wallInstant(wall, w.loc)}
		}
		if !w.twice {
			occ = occ[:1]
		}
		for _, c := range occ {
			if c.After(t) && (best.IsZero() || c.Before(best)) {
				best, bestWall = c, wall
			}
		}
		if !best.IsZero() && !w.twice {
			return best
		}
	}
	return best
}

// fallBack returns how far lt's zone sets its clocks back at its next
// change after lt; zero if that change moves them forward, or none comes.
func fallBack(lt time.Time) time.Duration {
	_, end := lt.ZoneBounds()
	if end.IsZero() {
		return 0
	}
	_, now := lt.Zone()
	_, next := end.In(lt.Location()).Zone()
	return max(0, time.Duration(now-next)*time.Second)
}

// wallOccurrences returns the instants, earliest first, at which loc's
// clocks read wall (whose fields are given in UTC): two in an hour that
// clocks fall back over, none in a gap they spring forward over.
func wallOccurrences(wall time.Time, loc *time.Location) []time.Time {
	var out []time.Time
	for _, probe := range [2]time.Time{wall.Add(-24 * time.Hour), wall.Add(24 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		c := wall.Add(-time.Duration(off) * time.Second).In(loc)
		if sameWall(c, wall) && (len(out) == 0 || !c.Equal(out[0])) {
			out = append(out, c)
		}
	}
	if len(out) == 2 && out[1].Before(out[0]) {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// A DST policy says what a schedule on the wall clock does when clocks
// change: Repeated, for a wall time that clocks fall back over, is "once"
// (its first occurrence) or "twice"; Skipped, for a wall time that a
// spring-forward gap skips, is "shift" (the first instant after the gap)
// or "skip".
type dstPolicy struct{ twice, skip bool }

// DSTDefault is the DST policy of a task without one: once, shift.
const DSTDefault = "once,shift"

// parseDST reads a DST policy: "once" or "twice", "shift" or "skip", or
// both, comma-separated; a part left out keeps its default.
func parseDST(s string) (dstPolicy, error) {
	var p dstPolicy
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		kind := map[string]string{"once": "repeated", "twice": "repeated", "shift": "skipped", "skip": "skipped"}[part]
		switch {
		case kind == "":
			return p, fmt.Errorf("%q is none of once, twice (a repeated wall time), shift, skip (a skipped one)", part)
		case seen[kind]:
			return p, fmt.Errorf("names the %s hour's policy twice", kind)
		}
		seen[kind] = true
		p.twice = p.twice || part == "twice"
		p.skip = p.skip || part == "skip"
	}
	return p, nil
}

// withDST returns s under policy p: a schedule on the wall clock takes it;
// one that follows elapsed time (every hour, a fixed zone) has no wall
// time that clocks repeat or skip.
func withDST(s schedule, p dstPolicy) schedule {
	if w, ok := s.(*wallSchedule); ok {
		c := *w // w may be shared: the parse cache hands it to every task of its expression
		c.twice, c.skip = p.twice, p.skip
		return &c
	}
	return s
}

// subHourChanges reports whether loc changes its clocks by other than
// whole hours (Australia/Lord_Howe's half hour) in the years around now:
// there, a schedule of every hour has wall times that a change skips or
// repeats, which robfig's Next passes over (it goes from 01:00 to 03:00
// across a half-hour gap at 02:00), so that it takes the DST policy as a
// schedule of particular hours does.
func subHourChanges(loc *time.Location) bool {
	t := time.Date(time.Now().Year()-2, 1, 1, 0, 0, 0, 0, loc)
	for range 16 { // two changes a year, for eight years
		_, end := t.ZoneBounds()
		if end.IsZero() {
			return false
		}
		_, before := t.Zone()
		_, after := end.In(loc).Zone()
		if (before-after)%3600 != 0 {
			return true
		}
		t = end
	}
	return false
}

// fixedZone reports whether loc has one offset for all time (UTC, a fixed
// zone), so that its schedules need no DST handling.
func fixedZone(loc *time.Location) bool {
	start, end := time.Unix(0, 0).In(loc).ZoneBounds()
	return start.IsZero() && end.IsZero()
}

// wallInstant returns the first instant at which loc's clocks read wall (whose
// fields are given in UTC), or, when a spring-forward gap skips wall, the
// first instant after the gap. time.Date leaves both choices unspecified.
func wallInstant(wall time.Time, loc *time.Location) time.Time {
	var first time.Time
	for _, probe := range [2]time.Time{wall.Add(-24 * time.Hour), wall.Add(24 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		c := wall.Add(-time.Duration(off) * time.Second).In(loc)
		if sameWall(c, wall) && (first.IsZero() || c.Before(first)) {
			first = c
		}
	}
	if !first.IsZero() {
		return first
	}
	// With the offset from before the gap, wall lands after it, in the zone
	// period that the gap opens.
	_, off := wall.Add(-24 * time.Hour).In(loc).Zone()
	start, _ := wall.Add(-time.Duration(off) * time.Second).In(loc).ZoneBounds()
	return start
}

func sameWall(c, wall time.Time) bool {
	y, mo, d := c.Date()
	h, mi, s := c.Clock()
	wy, wmo, wd := wall.Date()
	wh, wmi, ws := wall.Clock()
	return y == wy && mo == wmo && d == wd && h == wh && mi == wmi && s == ws && c.Nanosecond() == wall.Nanosecond()
}

// String writes p as DST takes it: "once,shift", "twice,skip", ….
func (p dstPolicy) String() string {
	r, k := "once", "shift"
	if p.twice {
		r = "twice"
	}
	if p.skip {
		k = "skip"
	}
	return r + "," + k
}
