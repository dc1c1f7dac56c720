//go:build !race

package mysql_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
