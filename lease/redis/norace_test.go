//go:build !race

package redis_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
