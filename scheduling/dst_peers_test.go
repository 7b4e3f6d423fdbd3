package scheduling

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The daylight-saving and time-zone cases of two peer cron libraries, run
// through ndigo's schedule (parseSchedule, then withDST under a policy, then
// Next, as TestDSTPolicies does):
//
//   - robfig/cron v3 spec_test.go (v3.0.1, the version go.mod requires): every
//     DST case of TestNext (America/New_York in March and November 2012 with
//     TZ= and CRON_TZ= prefixes or the zone on the time, America/Sao_Paulo
//     2018), and TestNextWithTz (a fixed +05:30 zone). robfig's specs are
//     used as written: ndigo's parser is robfig's, with an optional seconds
//     field, "?" and the zone prefixes. Each expects one fire.
//   - gorhill/cronexpr cronexpr_test.go: its master has no DST or time-zone
//     case (every time there is parsed in UTC); the cases are those of
//     TestDST in the same file as changed by the unmerged pull request
//     gorhill/cronexpr#17, which adds DST options (America/Los_Angeles 2014,
//     Asia/Ust-Nera's three-hour jump of 1 April 1981, Australia/LHI's
//     half-hour changes of 2014-15). Each expects four fires. Its
//     seven-field specs lose their year field "*". Its options map to
//     ndigo's policies as: DSTLeapUnskip ~ shift (without it, skip),
//     DSTFallFireEarly ~ once, DSTFallFireEarly|DSTFallFireLate ~ twice;
//     DSTFallFireLate alone (the repeated hour's second occurrence) has no
//     ndigo counterpart.
//
// The peers' times are wall clock with their offset, as each test means them
// (gorhill's time.Date of an ambiguous time is taken as Go resolves it);
// fires compare as instants. agree lists the policies under which ndigo gives
// the peer's fires, and the test checks that exactly those do: the others
// must give something else. Where ndigo's default ("once,shift") is not one
// of them, dflt is ndigo's own answer under it, asserted too; each case where
// no policy agrees says above it what the peer does and what ndigo does.
func TestDSTPeers(t *testing.T) {
	var (
		all   = []string{"once,shift", "once,skip", "twice,shift", "twice,skip"}
		once  = []string{"once,shift", "once,skip"}
		twice = []string{"twice,shift", "twice,skip"}
		shift = []string{"once,shift", "twice,shift"}
		skip  = []string{"once,skip", "twice,skip"}
	)
	for _, c := range []struct {
		peer, what string
		// zone is the location parseSchedule gets: the zone of a spec
		// without a TZ= or CRON_TZ= prefix ("+05:30" is a fixed offset).
		zone, cron string
		from       string   // an instant, "2006-01-02T15:04[:05]-07:00"
		want       string   // the peer's next fires, space-separated
		agree      []string // the policies under which ndigo fires want
		dflt       string   // ndigo's fires under "once,shift", when not in agree
	}{
		// robfig/cron v3 spec_test.go, TestNext: New York springs forward
		// at 02:00 EST to 03:00 EDT on 11 March 2012. The UTC zone given to
		// the parser loses to the spec's own.
		//
		// robfig skips a wall time the gap removes, to its next occurrence
		// a year later; ndigo's default shifts it to the gap's end.
		{"robfig", "DST 2am EST -> 3am EDT", "UTC", "TZ=America/New_York 0 30 2 11 Mar ?",
			"2012-03-11T00:00-05:00", "2013-03-11T02:30-04:00", skip, "2012-03-11T03:00-04:00"},
		// A spec on every hour follows elapsed time under every policy.
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T00:00-05:00", "2012-03-11T01:00-05:00", all, ""},
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T01:00-05:00", "2012-03-11T03:00-04:00", all, ""},
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T03:00-04:00", "2012-03-11T04:00-04:00", all, ""},
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T04:00-04:00", "2012-03-11T05:00-04:00", all, ""},
		{"robfig", "hourly job using CRON_TZ", "UTC", "CRON_TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T00:00-05:00", "2012-03-11T01:00-05:00", all, ""},
		{"robfig", "hourly job using CRON_TZ", "UTC", "CRON_TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T01:00-05:00", "2012-03-11T03:00-04:00", all, ""},
		{"robfig", "hourly job using CRON_TZ", "UTC", "CRON_TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T03:00-04:00", "2012-03-11T04:00-04:00", all, ""},
		{"robfig", "hourly job using CRON_TZ", "UTC", "CRON_TZ=America/New_York 0 0 * * * ?",
			"2012-03-11T04:00-04:00", "2012-03-11T05:00-04:00", all, ""},
		{"robfig", "1am nightly job", "UTC", "TZ=America/New_York 0 0 1 * * ?",
			"2012-03-11T00:00-05:00", "2012-03-11T01:00-05:00", all, ""},
		{"robfig", "1am nightly job", "UTC", "TZ=America/New_York 0 0 1 * * ?",
			"2012-03-11T01:00-05:00", "2012-03-12T01:00-04:00", all, ""},
		{"robfig", "2am nightly job (skipped)", "UTC", "TZ=America/New_York 0 0 2 * * ?",
			"2012-03-11T00:00-05:00", "2012-03-12T02:00-04:00", skip, "2012-03-11T03:00-04:00"},

		// robfig, TestNext: New York falls back at 02:00 EDT to 01:00 EST
		// on 4 November 2012; 01:00-01:59 happens twice.
		{"robfig", "DST 2am EDT -> 1am EST", "UTC", "TZ=America/New_York 0 30 2 04 Nov ?",
			"2012-11-04T00:00-04:00", "2012-11-04T02:30-05:00", all, ""},
		// robfig fires the repeated 01:30 at its second occurrence, still
		// ahead at 01:45 of the first: ndigo's twice; once fires only the
		// first occurrence, past, so next on 4 November 2013.
		{"robfig", "DST 2am EDT -> 1am EST", "UTC", "TZ=America/New_York 0 30 1 04 Nov ?",
			"2012-11-04T01:45-04:00", "2012-11-04T01:30-05:00", twice, "2013-11-04T01:30-05:00"},
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T01:00-04:00", all, ""},
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-11-04T01:00-04:00", "2012-11-04T01:00-05:00", all, ""},
		{"robfig", "hourly job", "UTC", "TZ=America/New_York 0 0 * * * ?",
			"2012-11-04T01:00-05:00", "2012-11-04T02:00-05:00", all, ""},
		{"robfig", "1am nightly job (runs twice)", "UTC", "TZ=America/New_York 0 0 1 * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T01:00-04:00", all, ""},
		{"robfig", "1am nightly job (runs twice)", "UTC", "TZ=America/New_York 0 0 1 * * ?",
			"2012-11-04T01:00-04:00", "2012-11-04T01:00-05:00", twice, "2012-11-05T01:00-05:00"},
		{"robfig", "1am nightly job (runs twice)", "UTC", "TZ=America/New_York 0 0 1 * * ?",
			"2012-11-04T01:00-05:00", "2012-11-05T01:00-05:00", all, ""},
		{"robfig", "2am nightly job", "UTC", "TZ=America/New_York 0 0 2 * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T02:00-05:00", all, ""},
		{"robfig", "2am nightly job", "UTC", "TZ=America/New_York 0 0 2 * * ?",
			"2012-11-04T02:00-05:00", "2012-11-05T02:00-05:00", all, ""},
		{"robfig", "3am nightly job", "UTC", "TZ=America/New_York 0 0 3 * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T03:00-05:00", all, ""},
		{"robfig", "3am nightly job", "UTC", "TZ=America/New_York 0 0 3 * * ?",
			"2012-11-04T03:00-05:00", "2012-11-05T03:00-05:00", all, ""},

		// robfig, TestNext: the same, with the zone on the time ("TZ=… <time>")
		// rather than the spec, which robfig's spec then follows; here it is
		// the zone parseSchedule gets.
		{"robfig", "hourly job, zone on the time", "America/New_York", "0 0 * * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T01:00-04:00", all, ""},
		{"robfig", "hourly job, zone on the time", "America/New_York", "0 0 * * * ?",
			"2012-11-04T01:00-04:00", "2012-11-04T01:00-05:00", all, ""},
		{"robfig", "hourly job, zone on the time", "America/New_York", "0 0 * * * ?",
			"2012-11-04T01:00-05:00", "2012-11-04T02:00-05:00", all, ""},
		{"robfig", "1am nightly job (runs twice), zone on the time", "America/New_York", "0 0 1 * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T01:00-04:00", all, ""},
		// As above: robfig's second run of 01:00 is ndigo's under twice.
		{"robfig", "1am nightly job (runs twice), zone on the time", "America/New_York", "0 0 1 * * ?",
			"2012-11-04T01:00-04:00", "2012-11-04T01:00-05:00", twice, "2012-11-05T01:00-05:00"},
		{"robfig", "1am nightly job (runs twice), zone on the time", "America/New_York", "0 0 1 * * ?",
			"2012-11-04T01:00-05:00", "2012-11-05T01:00-05:00", all, ""},
		{"robfig", "2am nightly job, zone on the time", "America/New_York", "0 0 2 * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T02:00-05:00", all, ""},
		{"robfig", "2am nightly job, zone on the time", "America/New_York", "0 0 2 * * ?",
			"2012-11-04T02:00-05:00", "2012-11-05T02:00-05:00", all, ""},
		{"robfig", "3am nightly job, zone on the time", "America/New_York", "0 0 3 * * ?",
			"2012-11-04T00:00-04:00", "2012-11-04T03:00-05:00", all, ""},
		{"robfig", "3am nightly job, zone on the time", "America/New_York", "0 0 3 * * ?",
			"2012-11-04T03:00-05:00", "2012-11-05T03:00-05:00", all, ""},
		{"robfig", "monthly job, zone on the time", "America/New_York", "0 0 3 3 * ?",
			"2012-11-04T00:00-04:00", "2012-12-03T03:00-05:00", all, ""},

		// robfig, TestNext: São Paulo's DST started at midnight (robfig
		// issue 157), on 4 November 2018, and ended on 18 February 2018.
		{"robfig", "DST makes midnight invalid", "UTC", "TZ=America/Sao_Paulo 0 0 9 10 * ?",
			"2018-10-17T05:00-04:00", "2018-11-10T06:00-05:00", all, ""},
		{"robfig", "DST makes midnight invalid", "UTC", "TZ=America/Sao_Paulo 0 0 9 22 * ?",
			"2018-02-14T05:00-05:00", "2018-02-22T07:00-05:00", all, ""},

		// robfig, TestNextWithTz: a spec without a zone follows the time's
		// fixed +05:30 offset.
		{"robfig", "TestNextWithTz", "+05:30", "14 14 * * *",
			"2016-01-03T13:09:03+05:30", "2016-01-03T14:14+05:30", all, ""},
		{"robfig", "TestNextWithTz", "+05:30", "14 14 * * ?",
			"2016-01-03T04:09:03+05:30", "2016-01-03T14:14+05:30", all, ""},
		{"robfig", "TestNextWithTz", "+05:30", "14 14 * * *",
			"2016-01-03T14:09:03+05:30", "2016-01-03T14:14+05:30", all, ""},
		{"robfig", "TestNextWithTz", "+05:30", "14 14 * * ?",
			"2016-01-03T14:00:00+05:30", "2016-01-03T14:14+05:30", all, ""},

		// gorhill/cronexpr (pull request #17) cronexpr_test.go, TestDST: Los
		// Angeles springs forward at 02:00 PST to 03:00 PDT on 9 March 2014.
		{"gorhill", "daily leap skip", "America/Los_Angeles", "0 0 2 * * *",
			"2014-03-09T01:00-08:00", "2014-03-10T02:00-07:00 2014-03-11T02:00-07:00 2014-03-12T02:00-07:00 2014-03-13T02:00-07:00",
			skip, "2014-03-09T03:00-07:00 2014-03-10T02:00-07:00 2014-03-11T02:00-07:00 2014-03-12T02:00-07:00"},
		{"gorhill", "daily leap unskip", "America/Los_Angeles", "0 0 2 * * *",
			"2014-03-09T01:00-08:00", "2014-03-09T03:00-07:00 2014-03-10T02:00-07:00 2014-03-11T02:00-07:00 2014-03-12T02:00-07:00",
			shift, ""},
		{"gorhill", "hourly leap skip", "America/Los_Angeles", "0 0 * * * *",
			"2014-03-09T01:00-08:00", "2014-03-09T03:00-07:00 2014-03-09T04:00-07:00 2014-03-09T05:00-07:00 2014-03-09T06:00-07:00",
			all, ""},
		{"gorhill", "hourly leap unskip", "America/Los_Angeles", "0 0 * * * *",
			"2014-03-09T01:00-08:00", "2014-03-09T03:00-07:00 2014-03-09T04:00-07:00 2014-03-09T05:00-07:00 2014-03-09T06:00-07:00",
			all, ""},
		{"gorhill", "daily quarter-hourly leap skip", "America/Los_Angeles", "0 */15 2 * * *",
			"2014-03-09T01:00-08:00", "2014-03-10T02:00-07:00 2014-03-10T02:15-07:00 2014-03-10T02:30-07:00 2014-03-10T02:45-07:00",
			skip, "2014-03-09T03:00-07:00 2014-03-10T02:00-07:00 2014-03-10T02:15-07:00 2014-03-10T02:30-07:00"},
		// Disagrees: gorhill moves each wall time the gap removes to the
		// same minute of the first hour after it (02:15 to 03:15 PDT),
		// firing four times after the gap; ndigo's shift moves them all to
		// the gap's end, one fire at 03:00 PDT, and skip drops them. No
		// policy gives gorhill's.
		{"gorhill", "daily quarter-hourly leap unskip", "America/Los_Angeles", "0 */15 2 * * *",
			"2014-03-09T01:00-08:00", "2014-03-09T03:00-07:00 2014-03-09T03:15-07:00 2014-03-09T03:30-07:00 2014-03-09T03:45-07:00",
			nil, "2014-03-09T03:00-07:00 2014-03-10T02:00-07:00 2014-03-10T02:15-07:00 2014-03-10T02:30-07:00"},

		// gorhill (#17), TestDST: Los Angeles falls back at 02:00 PDT to
		// 01:00 PST on 2 November 2014.
		//
		// Disagrees: gorhill's "fire early" fires a 02:00 job at the
		// instant of the change (01:00 PST, when 02:00 PDT would have
		// been); ndigo fires at the one time the clocks read 02:00, 02:00
		// PST, under every policy: 02:00 is not repeated.
		{"gorhill", "daily fall fire early", "America/Los_Angeles", "0 0 2 * * *",
			"2014-11-01T02:00-07:00", "2014-11-02T01:00-08:00 2014-11-03T02:00-08:00 2014-11-04T02:00-08:00 2014-11-05T02:00-08:00",
			nil, "2014-11-02T02:00-08:00 2014-11-03T02:00-08:00 2014-11-04T02:00-08:00 2014-11-05T02:00-08:00"},
		{"gorhill", "daily fall fire late", "America/Los_Angeles", "0 0 2 * * *",
			"2014-11-01T02:00-07:00", "2014-11-02T02:00-08:00 2014-11-03T02:00-08:00 2014-11-04T02:00-08:00 2014-11-05T02:00-08:00",
			all, ""},
		// Disagrees: gorhill fires both at the change (01:00 PST) and at
		// 02:00 PST; ndigo's twice fires only the latter, 02:00 being read
		// once.
		{"gorhill", "daily fall fire both", "America/Los_Angeles", "0 0 2 * * *",
			"2014-11-01T02:00-07:00", "2014-11-02T01:00-08:00 2014-11-02T02:00-08:00 2014-11-03T02:00-08:00 2014-11-04T02:00-08:00",
			nil, "2014-11-02T02:00-08:00 2014-11-03T02:00-08:00 2014-11-04T02:00-08:00 2014-11-05T02:00-08:00"},
		// Disagrees: gorhill's "fire early" fires the repeated 01:00 once,
		// at its first occurrence (PDT); a spec on every hour follows
		// elapsed time in ndigo (robfig's own Next), so it fires at both,
		// under every policy: gorhill's "fire twice".
		{"gorhill", "hourly fall fire early", "America/Los_Angeles", "0 0 * * * *",
			"2014-11-02T00:00-07:00", "2014-11-02T01:00-07:00 2014-11-02T02:00-08:00 2014-11-02T03:00-08:00 2014-11-02T04:00-08:00",
			nil, "2014-11-02T01:00-07:00 2014-11-02T01:00-08:00 2014-11-02T02:00-08:00 2014-11-02T03:00-08:00"},
		// Disagrees: gorhill's "fire late" fires 01:00 at its second
		// occurrence only (PST); ndigo fires both, as above.
		{"gorhill", "hourly fall fire late", "America/Los_Angeles", "0 0 * * * *",
			"2014-11-02T00:00-07:00", "2014-11-02T01:00-08:00 2014-11-02T02:00-08:00 2014-11-02T03:00-08:00 2014-11-02T04:00-08:00",
			nil, "2014-11-02T01:00-07:00 2014-11-02T01:00-08:00 2014-11-02T02:00-08:00 2014-11-02T03:00-08:00"},
		{"gorhill", "hourly fall fire twice", "America/Los_Angeles", "0 0 * * * *",
			"2014-11-02T00:00-07:00", "2014-11-02T01:00-07:00 2014-11-02T01:00-08:00 2014-11-02T02:00-08:00 2014-11-02T03:00-08:00",
			all, ""},

		// gorhill (#17), TestDST: Ust-Nera jumped three hours at midnight
		// on 1 April 1981, from 00:00 +09 to 03:00 +12.
		{"gorhill", "daily leap skip", "Asia/Ust-Nera", "0 0 2 * * *",
			"1981-03-31T02:00+09:00", "1981-04-02T02:00+12:00 1981-04-03T02:00+12:00 1981-04-04T02:00+12:00 1981-04-05T02:00+12:00",
			skip, "1981-04-01T03:00+12:00 1981-04-02T02:00+12:00 1981-04-03T02:00+12:00 1981-04-04T02:00+12:00"},
		{"gorhill", "daily leap unskip", "Asia/Ust-Nera", "0 0 2 * * *",
			"1981-03-31T02:00+09:00", "1981-04-01T03:00+12:00 1981-04-02T02:00+12:00 1981-04-03T02:00+12:00 1981-04-04T02:00+12:00",
			shift, ""},
		{"gorhill", "hourly leap skip", "Asia/Ust-Nera", "0 0 * * * *",
			"1981-03-31T23:00+09:00", "1981-04-01T03:00+12:00 1981-04-01T04:00+12:00 1981-04-01T05:00+12:00 1981-04-01T06:00+12:00",
			all, ""},
		{"gorhill", "hourly leap unskip", "Asia/Ust-Nera", "0 0 * * * *",
			"1981-03-31T23:00+09:00", "1981-04-01T03:00+12:00 1981-04-01T04:00+12:00 1981-04-01T05:00+12:00 1981-04-01T06:00+12:00",
			all, ""},
		{"gorhill", "quarter-hourly leap skip", "Asia/Ust-Nera", "0 */15 * * * *",
			"1981-03-31T23:15+09:00", "1981-03-31T23:30+09:00 1981-03-31T23:45+09:00 1981-04-01T03:00+12:00 1981-04-01T03:15+12:00",
			all, ""},
		{"gorhill", "quarter-hourly leap unskip", "Asia/Ust-Nera", "0 */15 * * * *",
			"1981-03-31T23:15+09:00", "1981-03-31T23:30+09:00 1981-03-31T23:45+09:00 1981-04-01T03:00+12:00 1981-04-01T03:15+12:00",
			all, ""},
		{"gorhill", "daily third-hourly leap skip", "Asia/Ust-Nera", "0 */20 2 * * *",
			"1981-03-31T02:40+09:00", "1981-04-02T02:00+12:00 1981-04-02T02:20+12:00 1981-04-02T02:40+12:00 1981-04-03T02:00+12:00",
			skip, "1981-04-01T03:00+12:00 1981-04-02T02:00+12:00 1981-04-02T02:20+12:00 1981-04-02T02:40+12:00"},
		// Disagrees: gorhill moves 02:00, 02:20 and 02:40, which the gap
		// removes, to the same minutes of the first hour after it, 03:00,
		// 03:20, 03:40 +12 (not by the gap's three hours); ndigo's shift
		// fires once, at the gap's end, 03:00 +12, and skip not at all.
		{"gorhill", "daily third-hourly leap unskip", "Asia/Ust-Nera", "0 */20 2 * * *",
			"1981-03-31T02:40+09:00", "1981-04-01T03:00+12:00 1981-04-01T03:20+12:00 1981-04-01T03:40+12:00 1981-04-02T02:00+12:00",
			nil, "1981-04-01T03:00+12:00 1981-04-02T02:00+12:00 1981-04-02T02:20+12:00 1981-04-02T02:40+12:00"},

		// gorhill (#17), TestDST: Lord Howe springs forward half an hour at
		// 02:00 +10:30 to 02:30 +11 on 5 October 2014.
		{"gorhill", "daily leap skip", "Australia/LHI", "0 0 2 * * *",
			"2014-10-04T02:00+10:30", "2014-10-06T02:00+11:00 2014-10-07T02:00+11:00 2014-10-08T02:00+11:00 2014-10-09T02:00+11:00",
			skip, "2014-10-05T02:30+11:00 2014-10-06T02:00+11:00 2014-10-07T02:00+11:00 2014-10-08T02:00+11:00"},
		{"gorhill", "daily leap unskip", "Australia/LHI", "0 0 2 * * *",
			"2014-10-04T02:00+10:30", "2014-10-05T02:30+11:00 2014-10-06T02:00+11:00 2014-10-07T02:00+11:00 2014-10-08T02:00+11:00",
			shift, ""},
		// A spec on every hour takes the policy in a zone that changes its
		// clocks by half an hour: the change skips 02:00.
		{"gorhill", "hourly leap skip", "Australia/LHI", "0 0 * * * *",
			"2014-10-05T01:00+10:30", "2014-10-05T03:00+11:00 2014-10-05T04:00+11:00 2014-10-05T05:00+11:00 2014-10-05T06:00+11:00",
			skip, "2014-10-05T02:30+11:00 2014-10-05T03:00+11:00 2014-10-05T04:00+11:00 2014-10-05T05:00+11:00"},
		{"gorhill", "hourly leap unskip", "Australia/LHI", "0 0 * * * *",
			"2014-10-05T01:00+10:30", "2014-10-05T02:30+11:00 2014-10-05T03:00+11:00 2014-10-05T04:00+11:00 2014-10-05T05:00+11:00",
			shift, ""},
		{"gorhill", "quarter-hourly leap skip", "Australia/LHI", "0 */15 * * * *",
			"2014-10-05T01:15+10:30", "2014-10-05T01:30+10:30 2014-10-05T01:45+10:30 2014-10-05T02:30+11:00 2014-10-05T02:45+11:00",
			all, ""},
		{"gorhill", "quarter-hourly leap unskip", "Australia/LHI", "0 */15 * * * *",
			"2014-10-05T01:15+10:30", "2014-10-05T01:30+10:30 2014-10-05T01:45+10:30 2014-10-05T02:30+11:00 2014-10-05T02:45+11:00",
			all, ""},
		{"gorhill", "third-hourly leap skip", "Australia/LHI", "0 */20 2 * * *",
			"2014-10-04T02:40+10:30", "2014-10-05T02:40+11:00 2014-10-06T02:00+11:00 2014-10-06T02:20+11:00 2014-10-06T02:40+11:00",
			skip, "2014-10-05T02:30+11:00 2014-10-05T02:40+11:00 2014-10-06T02:00+11:00 2014-10-06T02:20+11:00"},
		{"gorhill", "third-hourly leap unskip", "Australia/LHI", "0 */20 2 * * *",
			"2014-10-04T02:40+10:30", "2014-10-05T02:30+11:00 2014-10-05T02:40+11:00 2014-10-06T02:00+11:00 2014-10-06T02:20+11:00",
			shift, ""},

		// gorhill (#17), TestDST: Lord Howe falls back half an hour at
		// 02:00 +11 to 01:30 +10:30 on 5 April 2015; 01:30-01:59 happens
		// twice.
		{"gorhill", "daily fall fire early", "Australia/LHI", "0 45 1 * * *",
			"2015-04-05T01:45+11:00", "2015-04-06T01:45+10:30 2015-04-07T01:45+10:30 2015-04-08T01:45+10:30 2015-04-09T01:45+10:30",
			once, ""},
		{"gorhill", "daily fall fire late", "Australia/LHI", "0 45 1 * * *",
			"2015-04-05T01:45+10:30", "2015-04-06T01:45+10:30 2015-04-07T01:45+10:30 2015-04-08T01:45+10:30 2015-04-09T01:45+10:30",
			all, ""},
		{"gorhill", "daily fall fire twice", "Australia/LHI", "0 45 1 * * *",
			"2015-04-05T01:00+11:00", "2015-04-05T01:45+11:00 2015-04-05T01:45+10:30 2015-04-06T01:45+10:30 2015-04-07T01:45+10:30",
			twice, "2015-04-05T01:45+11:00 2015-04-06T01:45+10:30 2015-04-07T01:45+10:30 2015-04-08T01:45+10:30"},
		// A spec on every hour (or half hour) takes the policy in Lord Howe:
		// once fires the repeated 01:30 at its first occurrence, gorhill's
		// "fire early", twice at both.
		{"gorhill", "hourly fall fire early", "Australia/LHI", "0 30 * * * *",
			"2015-04-05T00:30+11:00", "2015-04-05T01:30+11:00 2015-04-05T02:30+10:30 2015-04-05T03:30+10:30 2015-04-05T04:30+10:30",
			once, ""},
		// Disagrees: gorhill's "fire late" fires 01:30 at its second
		// occurrence only, which no ndigo policy does.
		{"gorhill", "hourly fall fire late", "Australia/LHI", "0 30 * * * *",
			"2015-04-05T00:30+11:00", "2015-04-05T01:30+10:30 2015-04-05T02:30+10:30 2015-04-05T03:30+10:30 2015-04-05T04:30+10:30",
			nil, "2015-04-05T01:30+11:00 2015-04-05T02:30+10:30 2015-04-05T03:30+10:30 2015-04-05T04:30+10:30"},
		{"gorhill", "hourly fall fire twice", "Australia/LHI", "0 30 * * * *",
			"2015-04-05T00:30+11:00", "2015-04-05T01:30+11:00 2015-04-05T01:30+10:30 2015-04-05T02:30+10:30 2015-04-05T03:30+10:30",
			twice, "2015-04-05T01:30+11:00 2015-04-05T02:30+10:30 2015-04-05T03:30+10:30 2015-04-05T04:30+10:30"},
		{"gorhill", "half-hourly fall fire early", "Australia/LHI", "0 */30 * * * *",
			"2015-04-05T01:00+11:00", "2015-04-05T01:30+11:00 2015-04-05T02:00+10:30 2015-04-05T02:30+10:30 2015-04-05T03:00+10:30",
			once, ""},
		// Disagrees: gorhill's "fire late" fires 01:30 at its second
		// occurrence only, which no ndigo policy does.
		{"gorhill", "half-hourly fall fire late", "Australia/LHI", "0 */30 * * * *",
			"2015-04-05T01:00+11:00", "2015-04-05T01:30+10:30 2015-04-05T02:00+10:30 2015-04-05T02:30+10:30 2015-04-05T03:00+10:30",
			nil, "2015-04-05T01:30+11:00 2015-04-05T02:00+10:30 2015-04-05T02:30+10:30 2015-04-05T03:00+10:30"},
		{"gorhill", "half-hourly fall fire twice", "Australia/LHI", "0 */30 * * * *",
			"2015-04-05T01:00+11:00", "2015-04-05T01:30+11:00 2015-04-05T01:30+10:30 2015-04-05T02:00+10:30 2015-04-05T02:30+10:30",
			twice, "2015-04-05T01:30+11:00 2015-04-05T02:00+10:30 2015-04-05T02:30+10:30 2015-04-05T03:00+10:30"},
	} {
		name := c.peer + " " + c.what + ": " + c.zone + " " + c.cron + " from " + c.from
		var (
			loc *time.Location
			err error
		)
		if strings.HasPrefix(c.zone, "+") || strings.HasPrefix(c.zone, "-") {
			var at time.Time
			at, err = time.Parse("-07:00", c.zone)
			_, off := at.Zone()
			loc = time.FixedZone(c.zone, off)
		} else {
			loc, err = time.LoadLocation(c.zone)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		instants := func(s string) []time.Time {
			var out []time.Time
			for _, f := range strings.Fields(s) {
				at, err := time.Parse("2006-01-02T15:04-07:00", f)
				if err != nil {
					if at, err = time.Parse("2006-01-02T15:04:05-07:00", f); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				out = append(out, at)
			}
			return out
		}
		from, want := instants(c.from)[0], instants(c.want)
		var dflt []time.Time
		switch {
		case slices.Contains(c.agree, DSTDefault) && c.dflt != "":
			t.Fatalf("%s: the default agrees with the peer, so the case needs no dflt", name)
		case !slices.Contains(c.agree, DSTDefault):
			if dflt = instants(c.dflt); len(dflt) != len(want) {
				t.Fatalf("%s: dflt has %d fires, want has %d", name, len(dflt), len(want))
			}
		}
		// Fires show in the spec's zone: its prefix's, else loc.
		in := loc
		if _, rest, ok := strings.Cut(strings.Fields(c.cron)[0], "TZ="); ok {
			if in, err = time.LoadLocation(rest); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		show := func(ts []time.Time) string {
			var b []string
			for _, at := range ts {
				b = append(b, at.In(in).Format("2006-01-02T15:04:05-07:00"))
			}
			return strings.Join(b, " ")
		}
		for _, policy := range all {
			p, err := parseDST(policy)
			if err != nil {
				t.Fatal(err)
			}
			base, err := parseSchedule(c.cron, loc)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			s := withDST(base, p)
			var got []time.Time
			for at := s.Next(from); !at.IsZero() && len(got) < len(want); at = s.Next(at) {
				got = append(got, at)
			}
			same := slices.EqualFunc(got, want, time.Time.Equal)
			switch {
			case slices.Contains(c.agree, policy) && !same:
				t.Errorf("%s: under %s fires %s, want the peer's %s", name, policy, show(got), show(want))
			case !slices.Contains(c.agree, policy) && same:
				t.Errorf("%s: under %s fires the peer's %s, which the table says it does not", name, policy, show(got))
			}
			if policy == DSTDefault && dflt != nil && !slices.EqualFunc(got, dflt, time.Time.Equal) {
				t.Errorf("%s: under %s fires %s, want ndigo's %s (the peer's is %s)", name, policy, show(got), show(dflt), show(want))
			}
		}
	}
}
