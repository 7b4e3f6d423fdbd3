package durations

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := map[string]time.Duration{
		"500": 500 * time.Millisecond, "0": 0, " 5s ": 5 * time.Second, "1m30s": 90 * time.Second,
		"1.5s": 1500 * time.Millisecond, "-200": -200 * time.Millisecond, "250ms": 250 * time.Millisecond,
		"9223372036854": 9223372036854 * time.Millisecond,
	}
	for in, want := range good {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "5 s", "five", "1e3", "+5", "99999999999999999999", "9223372036855", "-9223372036855", "-", "5x"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted it", in)
		}
	}
}
