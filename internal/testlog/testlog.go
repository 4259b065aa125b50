// Package testlog holds what tests use to read the logs of the code they
// run.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a log destination that tests read while the code under test
// writes to it from any goroutine. The zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it is safe for concurrent use.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
