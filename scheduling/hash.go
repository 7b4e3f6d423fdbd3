package scheduling

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// A cron field's name and the values it takes, for H. H in the day of the
// month takes 1 to 28, so that it fires in every month.
type cronField struct {
	name   string
	lo, hi int
}

var (
	fieldsWithSeconds = []cronField{{"second", 0, 59}, {"minute", 0, 59}, {"hour", 0, 23}, {"day of month", 1, 28}, {"month", 1, 12}, {"day of week", 0, 6}}
	fieldsFive        = fieldsWithSeconds[1:]
)

// hasH reports whether expr uses H in a field: an item "H", "H(a-b)",
// "H/n" or "H(a-b)/n".
func hasH(expr string) bool {
	if strings.IndexByte(expr, 'H') < 0 {
		return false // most expressions: no H item, and nothing to split
	}
	for _, f := range strings.Fields(expr) {
		for _, item := range strings.Split(f, ",") {
			if item == "H" || strings.HasPrefix(item, "H(") || strings.HasPrefix(item, "H/") {
				return true
			}
		}
	}
	return false
}

// resolveH returns expr with each H item replaced by the value that a hash
// of seed (the task's name) picks in its field, as Jenkins does: "H" a
// value of the field, "H(a-b)" a value in [a, b], "H/n" and "H(a-b)/n" the
// steps of n from an offset the hash picks below n. The same seed gives
// the same expression on every node and across restarts; each field has a
// hash of its own. An expression without H, or a descriptor, is returned
// as it is.
func resolveH(expr, seed string) (string, error) {
	if !hasH(expr) {
		return expr, nil
	}
	body := strings.TrimSpace(expr)
	var prefix string
	if strings.HasPrefix(body, "TZ=") || strings.HasPrefix(body, "CRON_TZ=") {
		i := strings.IndexAny(body, " \t")
		if i < 0 {
			return expr, nil // the parser says what is wrong
		}
		prefix, body = body[:i]+" ", body[i:]
	}
	fields := strings.Fields(body)
	var spec []cronField
	switch len(fields) {
	case 5:
		spec = fieldsFive
	case 6:
		spec = fieldsWithSeconds
	default:
		return expr, nil // the parser says what is wrong
	}
	for i, f := range fields {
		items := strings.Split(f, ",")
		for j, item := range items {
			if item != "H" && !strings.HasPrefix(item, "H(") && !strings.HasPrefix(item, "H/") {
				continue
			}
			v, err := resolveItem(item, spec[i], fieldHash(seed, i))
			if err != nil {
				return "", fmt.Errorf("%s field %q: %w", spec[i].name, item, err)
			}
			items[j] = v
		}
		fields[i] = strings.Join(items, ",")
	}
	return prefix + strings.Join(fields, " "), nil
}

// resolveItem resolves one H item of field f with hash h.
func resolveItem(item string, f cronField, h uint64) (string, error) {
	lo, hi := f.lo, f.hi
	rest := item[1:]
	if strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return "", fmt.Errorf("a closing parenthesis must follow the range, as in H(0-29)")
		}
		a, b, ok := strings.Cut(rest[1:end], "-")
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if !ok || errA != nil || errB != nil {
			return "", fmt.Errorf("the range must be two numbers, as in H(0-29)")
		}
		if x > y || x < f.lo || y > f.hi {
			return "", fmt.Errorf("the range %d-%d must lie within %d-%d, its start first", x, y, f.lo, f.hi)
		}
		lo, hi, rest = x, y, rest[end+1:]
	}
	switch {
	case rest == "":
		return strconv.Itoa(lo + int(h%uint64(hi-lo+1))), nil
	case strings.HasPrefix(rest, "/"):
		n, err := strconv.Atoi(rest[1:])
		if err != nil || n < 1 || n > hi-lo+1 {
			return "", fmt.Errorf("the step after H/ must be a whole number from 1 to %d", hi-lo+1)
		}
		return strconv.Itoa(lo+int(h%uint64(n))) + "-" + strconv.Itoa(hi) + "/" + strconv.Itoa(n), nil
	}
	return "", fmt.Errorf("the forms of H are H, H(a-b), H/n and H(a-b)/n")
}

// fieldHash is the hash of seed for field i: FNV-1a of both, mixed by
// splitmix64's finalizer, so that names that differ in their last byte
// land apart.
func fieldHash(seed string, i int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(seed))
	h.Write([]byte{0, byte(i)})
	z := h.Sum64()
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// jitterOffset is the offset in [0, d) of the fire of task name at instant
// fire: a hash of both, the same on every node.
func jitterOffset(name string, fire time.Time, d time.Duration) time.Duration {
	h := fieldHash(name+"@"+strconv.FormatInt(fire.UnixNano(), 10), 255)
	return time.Duration(h % uint64(d))
}
