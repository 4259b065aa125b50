//go:build race

package integration

// raceSlowdown scales time budgets in tests that measure the client's own
// speed: the race detector makes Go code several times slower, which no
// deployment runs with.
const raceSlowdown = 10
