//go:build !linux

package redisstore

// yieldThread does nothing here: the polling thread yields to goroutines
// only (see the Linux version).
func yieldThread() {}
