//go:build race

package postgres_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = true
