package main

import (
	"runtime/debug"
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

// TestStampedCheckout: a binary stamped by go build names the commit it
// was built from, marked when the tree had changes; one without a stamp
// leaves the description to the repository.
func TestStampedCheckout(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "e8631ddaddfbf1eb708479feae1c83f935e2efc1"}}
	if got, want := stampedCheckout(rev), "commit e8631dd (built from)"; got != want {
		t.Errorf("clean build: got %q, want %q", got, want)
	}
	dirty := append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	if got, want := stampedCheckout(dirty), "commit e8631dd with uncommitted changes (built from)"; got != want {
		t.Errorf("modified build: got %q, want %q", got, want)
	}
	if got := stampedCheckout([]debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}); got != "" {
		t.Errorf("unstamped build: got %q, want \"\"", got)
	}
}
