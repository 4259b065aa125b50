package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartProfile(t *testing.T) {
	stop, err := startProfile("")
	if err != nil || stop() != nil {
		t.Fatalf("no -cpuprofile: err %v", err)
	}

	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err = startProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		t.Fatalf("profile %s is empty", path)
	}

	_, err = startProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof"))
	if err == nil || !strings.Contains(err.Error(), "-cpuprofile") {
		t.Fatalf("a path in a missing directory: err %v, want a -cpuprofile error", err)
	}
}

func TestReportSaysProfiled(t *testing.T) {
	for _, path := range []string{"", "cpu.prof"} {
		var b strings.Builder
		writeReport(&b, facts{cpuProfile: path}, nil, nil, nil)
		said := strings.Contains(b.String(), "CPU profiler (-cpuprofile cpu.prof)")
		if said != (path != "") {
			t.Errorf("-cpuprofile %q: report mentions the profiler: %v\n%s", path, said, b.String())
		}
	}
}
