package didyoumean

import (
	"fmt"
	"testing"
)

func TestClosest(t *testing.T) {
	known := []string{"lockTtl", "lockWait", "namespace", "url"}
	for word, want := range map[string]string{
		"lockTTL": "lockTtl", "lockwiat": "lockWait", "namspace": "namespace", "urll": "url",
		"colour": "", "": "",
	} {
		if got := Closest(word, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
}

func ExampleClosest() {
	fmt.Println(Closest("lockTTL", []string{"lockTtl", "lockWait"}))
	// Output: lockTtl
}
