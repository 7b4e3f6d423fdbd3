// Package didyoumean finds the known word that a misspelt one most likely
// meant, for "did you mean" hints in errors about unknown keys.
package didyoumean

import "strings"

// Closest returns the word of known that word most likely misspells: equal
// but for case, or within two edits (Levenshtein, case ignored). It returns
// "" when none is that close.
func Closest(word string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if strings.EqualFold(k, word) {
			return k
		}
		if d := distance(strings.ToLower(k), strings.ToLower(word)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
