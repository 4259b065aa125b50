//go:build !race

package redisstore

// raceEnabled is set when the race detector runs, under which sync.Pool
// drops a share of what it is given, so pooled memory is allocated anew
// at random.
const raceEnabled = false
