package pglocks

import (
	"fmt"
	"testing"
)

// TestRecentKeepsTheLastDistinctKeys: recent holds the last recentKeys
// distinct keys added, oldest out first; a key added again keeps its place.
func TestRecentKeepsTheLastDistinctKeys(t *testing.T) {
	var r recent
	sum := func(i int) [16]byte { return keySum("ns", fmt.Sprint("k", i)) }
	for i := range recentKeys {
		r.add(sum(i))
		r.add(sum(0)) // already in: no slot
	}
	for i := range recentKeys {
		if !r.has(sum(i)) {
			t.Fatalf("key %d of %d missing", i, recentKeys)
		}
	}
	r.add(sum(recentKeys))
	if r.has(sum(0)) || !r.has(sum(1)) || !r.has(sum(recentKeys)) {
		t.Fatal("the oldest key was not the one that went")
	}
	if len(r.in) != recentKeys {
		t.Fatalf("%d keys held, want %d", len(r.in), recentKeys)
	}
}
