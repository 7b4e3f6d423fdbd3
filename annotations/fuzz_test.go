package annotations

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func FuzzParseTag(f *testing.F) {
	for _, seed := range []string{
		`method:"CloseBooks" cron:"0 2 * * *" lock:"payroll-window" lockTtl:"60s"`,
		`method:"A" lockWait:"500" renew:"true"`,
		`a:"\"quoted\" \\ \u00e9"`,
		`method:"A" method:"B"`,
		`bogus`, `k:`, `k:"`, `:"v"`, ` `, "k:\"\x00\"", `k:"\q"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		pairs, err := parseTag(tag)
		if err != nil {
			return
		}
		// Whatever parses, reflect reads alike, and re-encoding round-trips.
		var b strings.Builder
		for _, p := range pairs {
			if v, ok := reflect.StructTag(tag).Lookup(p.key); !ok || v != p.value {
				t.Fatalf("parseTag(%q) gives %s=%q, reflect gives %q, %v", tag, p.key, p.value, v, ok)
			}
			b.WriteString(p.key + ":" + strconv.Quote(p.value) + " ")
		}
		again, err := parseTag(b.String())
		if err != nil || (len(pairs) > 0 && !reflect.DeepEqual(again, pairs)) {
			t.Fatalf("round trip of %q: %v, %v; want %v", b.String(), again, err, pairs)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, seed := range []string{"500", "5s", "1m30s", "0", "-200", " 7 ", "1.5h", "", "5 s", "99999999999999999999", "9223372036854", "1e3"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		trimmed := strings.TrimSpace(s)
		if ms, perr := strconv.ParseInt(trimmed, 10, 64); perr == nil {
			if d != time.Duration(ms)*time.Millisecond {
				t.Fatalf("ParseDuration(%q) = %v, want %d ms", s, d, ms)
			}
			return
		}
		if want, perr := time.ParseDuration(trimmed); perr != nil || want != d {
			t.Fatalf("ParseDuration(%q) = %v, time.ParseDuration gives %v, %v", s, d, want, perr)
		}
	})
}

// FuzzControllerTag builds a controller type whose marker field carries the
// fuzzed tag: reading it must never panic, and any problem must be reported
// as an error.
func FuzzControllerTag(f *testing.F) {
	f.Add(`method:"Fine" cron:"@daily" lock:"k" lockTtl:"5s"`)
	f.Add(`method:"Fine" cron:"61 * * * *" lockTTL:"5s"`)
	f.Add(`method:"Nope" cron:"CRON_TZ=Nowhere 0 2 * * *" renew:"yes"`)
	f.Add(`method:"Fine" cron:"@every 1ms" maxRunTime:"-1"`)
	f.Fuzz(func(t *testing.T, tag string) {
		typ := reflect.StructOf([]reflect.StructField{{Name: "X", Type: scheduledType, Tag: reflect.StructTag(tag)}})
		tasks, err := Tasks(reflect.New(typ).Interface())
		if err == nil && len(tasks) != 1 {
			t.Fatalf("tag %q: %d tasks and no error", tag, len(tasks))
		}
	})
}

func FuzzExpand(f *testing.F) {
	for _, seed := range []string{"${payroll.cron}", "a${x}b${y:d}c", "${", "${}", "$${x}", "}${x:}{", "plain"} {
		f.Add(seed)
	}
	values := ResolverFunc(func(path string) (string, bool) { return "<" + path + ">", path != "missing" })
	f.Fuzz(func(t *testing.T, s string) {
		got, from, err := expand(s, values)
		if !strings.Contains(s, "${") && (err != nil || got != s || from != "") {
			t.Fatalf("expand(%q) = %q, %q, %v; want it unchanged, from nowhere", s, got, from, err)
		}
		if err == nil && strings.Contains(s, "${") && !strings.HasPrefix(from, "${") {
			t.Fatalf("expand(%q) = %q from %q: want the placeholders named", s, got, from)
		}
		if err == nil && strings.Contains(s, "${missing}") {
			t.Fatalf("expand(%q) = %q: a missing setting without default resolved", s, got)
		}
	})
}
