package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
)

// The server the tests share (package redistest), started on first use
// and stopped by TestMain, by its pid.
var (
	sharedOnce sync.Once
	shared     *redistest.Server
	sharedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// requireServer returns the shared server, starting it on first use. It
// skips the test, saying why, when none can run, and fails it instead when
// RATEKEEPER_REQUIRE_REDIS=1.
func requireServer(t testing.TB) *redistest.Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = redistest.Start() })
	if shared == nil {
		redistest.Unavailable(t, sharedErr)
	}
	return shared
}

// randomPrefix returns a key prefix private to one test.
func randomPrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rkcli-" + hex.EncodeToString(b[:])
}
