//go:build race

package redlock_test

// raceEnabled reports whether the race detector is on: it slows every
// round trip of the client several times.
const raceEnabled = true
