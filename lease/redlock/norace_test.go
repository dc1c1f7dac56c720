//go:build !race

package redlock_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
