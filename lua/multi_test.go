package lua

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

func TestStackedSource(t *testing.T) {
	src := Stacked()
	if !strings.HasPrefix(src, common) || !strings.HasSuffix(src, multi) {
		t.Fatal("the stacked script does not start with common.lua and end with multi.lua")
	}
	// One function per algorithm file (GCRA and the token bucket share
	// one), each with the full prelude and part.lua.
	for name, body := range map[string]string{"bucket.lua": bucket, "sliding_window_log.lua": slidingWindowLog,
		"sliding_window_counter.lua": slidingWindowCounter, "fixed_window.lua": fixedWindow} {
		if n := strings.Count(src, body); n != 1 {
			t.Errorf("%s appears %d times in the stacked script, want once", name, n)
		}
	}
	for name, body := range map[string]string{"prelude.lua": prelude, "part.lua": part} {
		if n := strings.Count(src, body); n != 4 {
			t.Errorf("%s appears %d times in the stacked script, want 4", name, n)
		}
	}
	if Stacked() != src {
		t.Fatal("Stacked is not stable")
	}
	if r := Refund(); !strings.HasPrefix(r, common) || !strings.HasSuffix(r, refund) {
		t.Fatal("the refund script is not common.lua and refund.lua")
	}
}

func TestStackedScriptsCompile(t *testing.T) {
	addr := startRedis(t)
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for name, src := range map[string]string{"stacked": Stacked(), "stacked lean": StackedLean(), "refund": Refund()} {
		scriptLoads(t, conn, rd, name, src)
	}
}
