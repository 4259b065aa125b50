package main

import (
	"testing"
	"time"
	"unsafe"
)

// TestCallerPadding: each caller's recorder and worker fill exactly
// cacheLinePad bytes, so that no two callers share a cache line. A field
// added to either changes its size and fails here until the padding is
// adjusted.
func TestCallerPadding(t *testing.T) {
	if n := unsafe.Sizeof(recorder{}); n != cacheLinePad {
		t.Errorf("recorder is %d bytes, want %d", n, cacheLinePad)
	}
	if n := unsafe.Sizeof(worker{}); n != cacheLinePad {
		t.Errorf("worker is %d bytes, want %d", n, cacheLinePad)
	}
}

// TestRKOptionsLoneSpin: -lone-spin reaches every ratekeeper Redis store
// of the matrix, batched or not.
func TestRKOptionsLoneSpin(t *testing.T) {
	for _, spin := range []time.Duration{0, -1, 250 * time.Microsecond} {
		e := &env{loneSpin: spin}
		for _, batch := range []bool{true, false} {
			if got := e.rkOptions("p", batch, true).LoneSpin; got != spin {
				t.Errorf("-lone-spin %v, batch %v: store LoneSpin %v", spin, batch, got)
			}
		}
	}
}
