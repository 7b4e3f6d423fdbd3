package annotations

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/TASKS.md's options table is the tag keys' table, as tagKeys states
// it.
func TestReadmeOptionsTable(t *testing.T) {
	readme, err := os.ReadFile("../docs/TASKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := optionsTable(); !strings.Contains(string(readme), want) {
		t.Fatalf("docs/TASKS.md does not contain the options table as tagKeys states it; want:\n%s", want)
	}
}

// The package doc lists every tag key, in order.
func TestDocListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(doc), "// Tag keys:\n//\n")
	list, _, _ = strings.Cut(list, "//\n")
	var keys []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(\w+) `).FindAllStringSubmatch(list, -1) {
		keys = append(keys, m[1])
	}
	if !slices.Equal(keys, keyNames()) {
		t.Fatalf("doc.go lists tag keys %v, want %v", keys, keyNames())
	}
}
