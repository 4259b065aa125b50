package policy

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// The watcher reloads a changed file once, reports a broken file once (not
// at every poll), ignores a touched file, and survives a file that
// disappears for a while.
func TestPollReloadsOnlyChangedContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	write := func(text string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	const valid = "policies:\n  api:\n    key: ip\n    limits: [{rate: 10, period: 1h}]\n"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(valid, t0)
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(path, st, Options{Keys: map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, reloads, failures uint64) {
		t.Helper()
		s.poll()
		if got := s.Status(); got.Reloads != reloads || got.Failures != failures {
			t.Fatalf("%s: got %d reloads and %d failures, want %d and %d", step, got.Reloads, got.Failures, reloads, failures)
		}
	}
	check("unchanged", 0, 0)
	write(valid, t0.Add(time.Second))
	check("touched", 0, 0)
	write("policies: {api: {key: ip, limits: [{rate: -1, period: 1h}]}}\n", t0.Add(2*time.Second))
	check("broken", 0, 1)
	check("still broken", 0, 1)
	write("policies: {api: {key: ip, limits: [{rate: -1, period: 1h}]}}\n", t0.Add(3*time.Second))
	check("broken, touched", 0, 1)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	check("gone", 0, 1)
	write("policies: {api: {key: ip, limits: [{rate: 20, period: 1h}]}}\n", t0.Add(4*time.Second))
	check("fixed", 1, 1)
	if s.Status().LastError != nil {
		t.Fatalf("last error after a good reload: got %v, want nil", s.Status().LastError)
	}
	// Same size, same modification time, different content: a write the
	// stat cannot see is picked up by the next change it can see.
	write("policies: {api: {key: ip, limits: [{rate: 30, period: 1h}]}}\n", t0.Add(4*time.Second))
	check("invisible change", 1, 1)
	write("policies: {api: {key: ip, limits: [{rate: 30, period: 1h}]}}\n", t0.Add(5*time.Second))
	check("visible change", 2, 1)
}
