//go:build race

package scheduling

// raceEnabled reports a build with the race detector, under which the
// long property tests run a shorter walk.
const raceEnabled = true
