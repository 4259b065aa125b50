//go:build !race

package integration

// raceSlowdown scales time budgets in tests that measure the client's own
// speed; 1 without the race detector.
const raceSlowdown = 1
