// Package durations parses the durations ndigo reads from struct tags and
// configuration: a Go duration such as "5s", or a whole number of
// milliseconds such as "500", since operators often write timeouts as plain
// numbers.
package durations

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const want = `want a Go duration such as "5s" or milliseconds such as "500"`

// Parse parses s, surrounding spaces ignored, as a Go duration or a whole
// number of milliseconds (optionally negative).
func Parse(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty duration: " + want)
	}
	digits := strings.TrimPrefix(t, "-")
	if digits != "" && strings.Trim(digits, "0123456789") == "" {
		ms, err := strconv.ParseInt(t, 10, 64)
		const limit = int64(1<<63-1) / int64(time.Millisecond)
		if err != nil || ms > limit || ms < -limit {
			return 0, fmt.Errorf("duration %q: too many milliseconds", s)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %s", s, want)
	}
	return d, nil
}
