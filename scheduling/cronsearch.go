package scheduling

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// nextUTC is robfig's SpecSchedule.Next for a spec evaluated in UTC, where
// no day has a DST change: the same result, found by scanning the fields'
// bit sets with integer arithmetic instead of stepping a time.Time one unit
// at a time. The scheduler calls Next for every fire of every task, so this
// is on the path of both startup and same-tick dispatch. The fuzz target
// FuzzNextUTC checks it against robfig.
func nextUTC(s *cron.SpecSchedule, t time.Time) time.Time {
	t = t.UTC()
	t = t.Add(time.Second - time.Duration(t.Nanosecond()))
	y, mo, d := t.Date()
	year, month, day := y, int(mo), d
	hour, minute, second := t.Clock()
	yearLimit := year + 5

	for year <= yearLimit {
		// Month.
		if m, ok := nextBit(s.Month, month, 12); !ok {
			year, month, day, hour, minute, second = year+1, 1, 1, 0, 0, 0
			continue
		} else if m != month {
			month, day, hour, minute, second = m, 1, 0, 0, 0
		}
		// Day.
		dim := daysInMonth(year, month)
		wd := int(time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Weekday())
		for day <= dim && !dayMatch(s, day, wd) {
			day, hour, minute, second = day+1, 0, 0, 0
			wd = (wd + 1) % 7
		}
		if day > dim {
			month, day, hour, minute, second = month+1, 1, 0, 0, 0
			if month > 12 {
				year, month = year+1, 1
			}
			continue
		}
		// Hour, minute, second: a field that runs out carries into the one
		// above it, and the search resumes there.
		if h, ok := nextBit(s.Hour, hour, 23); !ok {
			day, hour, minute, second = day+1, 0, 0, 0
			if day > dim {
				month, day = month+1, 1
				if month > 12 {
					year, month = year+1, 1
				}
			}
			continue
		} else if h != hour {
			hour, minute, second = h, 0, 0
		}
		if m, ok := nextBit(s.Minute, minute, 59); !ok {
			hour, minute, second = hour+1, 0, 0
			if hour > 23 {
				day, hour = day+1, 0
				if day > dim {
					month, day = month+1, 1
					if month > 12 {
						year, month = year+1, 1
					}
				}
			}
			continue
		} else if m != minute {
			minute, second = m, 0
		}
		if sec, ok := nextBit(s.Second, second, 59); !ok {
			minute, second = minute+1, 0
			if minute > 59 {
				hour, minute = hour+1, 0
				if hour > 23 {
					day, hour = day+1, 0
					if day > dim {
						month, day = month+1, 1
						if month > 12 {
							year, month = year+1, 1
						}
					}
				}
			}
			continue
		} else {
			second = sec
		}
		return time.Date(year, time.Month(month), day, hour, minute, second, 0, time.UTC)
	}
	return time.Time{}
}

// nextBit returns the lowest set bit of set at or above from and at most max.
func nextBit(set uint64, from, max int) (int, bool) {
	if from > max {
		return 0, false
	}
	rest := set >> uint(from) & (1<<uint(max-from+1) - 1)
	if rest == 0 {
		return 0, false
	}
	return from + bits.TrailingZeros64(rest), true
}

// dayMatch is robfig's rule: with either day field "*", both must match;
// otherwise either may.
func dayMatch(s *cron.SpecSchedule, day, weekday int) bool {
	const star = 1 << 63
	dom := s.Dom&(1<<uint(day)) != 0
	dow := s.Dow&(1<<uint(weekday)) != 0
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

func daysInMonth(year, month int) int {
	if month == 2 {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return daysIn[month]
}

// utcSchedule is a cron spec on a zone without DST changes.
type utcSchedule struct {
	spec cron.SpecSchedule // evaluated in UTC
	loc  *time.Location    // the zone of the fields; fixed offset
}

func (u *utcSchedule) Next(t time.Time) time.Time {
	_, off := t.In(u.loc).Zone()
	shift := time.Duration(off) * time.Second
	n := nextUTC(&u.spec, t.Add(shift))
	if n.IsZero() {
		return n
	}
	return n.Add(-shift).In(t.Location())
}
