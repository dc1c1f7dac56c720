//go:build race

package redis_test

// raceEnabled reports whether the race detector is on: it slows the
// client's own encoding of a 10,000-key batch about threefold.
const raceEnabled = true
