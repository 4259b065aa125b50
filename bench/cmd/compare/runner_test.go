package main

import (
	"testing"
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
