package lua

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
)

func TestSource(t *testing.T) {
	for _, name := range Names() {
		for _, lean := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lean=%v", name, lean), func(t *testing.T) {
				src, err := Source(name, lean)
				if err != nil {
					t.Fatal(err)
				}
				bucketAlg := name == "gcra" || name == "token_bucket"
				p := prelude
				if lean && name != "suppressed" {
					p = leanPrelude
				}
				if p == prelude {
					p = override + "\n" + prelude
				}
				prefix := common + "\n" + unreadable + "\n" + p
				if lean && bucketAlg {
					prefix = common + "\n"
				}
				if !strings.HasPrefix(src, prefix) {
					t.Fatal("script does not start with common.lua and its prelude")
				}
				file := name + ".lua"
				switch {
				case bucketAlg && lean:
					file = "lean_bucket.lua"
				case bucketAlg:
					file = "bucket.lua"
				}
				body, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(src, string(body)) {
					t.Fatalf("script does not end with %s", file)
				}
				if name == "sliding_window_counter" || name == "suppressed" {
					counterFile, err := os.ReadFile("counter.lua")
					if err != nil {
						t.Fatal(err)
					}
					if !strings.HasSuffix(src, string(counterFile)+"\n"+string(body)) {
						t.Fatalf("script does not have counter.lua before %s", file)
					}
				}
				if file != "lean_bucket.lua" && !strings.Contains(string(body), "= finish(") && !strings.Contains(string(body), "return finish(") {
					t.Fatalf("%s does not answer through finish", file)
				}
			})
		}
	}
	if _, err := Source("leaky_bucket", false); !errors.Is(err, ErrUnknownScript) {
		t.Fatalf("unknown name: got %v, want ErrUnknownScript", err)
	}
}

func TestSourceWithOverrides(t *testing.T) {
	for i, name := range Names() {
		src, err := SourceWithOverrides(name)
		if name == "suppressed" {
			if !errors.Is(err, ErrUnknownScript) {
				t.Errorf("%s: got %v, want ErrUnknownScript (no lean script with overrides)", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body := leanBucket
		if bodies[i] != &bucket {
			body = leanPrelude + "\n" + algorithmBody(i)
		}
		want := common + "\n" + unreadable + "\n" + override + "\n" + leanOverride + "\nlocal function decide()\n" + body + "\nend\n"
		if !strings.HasPrefix(src, want) || !strings.HasSuffix(src, "return reply\n") {
			t.Errorf("%s: the script is not common, unreadable, override, lean_override and the lean script as decide, then the reply", name)
		}
	}
	if _, err := SourceWithOverrides("leaky_bucket"); !errors.Is(err, ErrUnknownScript) {
		t.Fatalf("unknown name: got %v, want ErrUnknownScript", err)
	}
}

func TestNames(t *testing.T) {
	want := []string{"gcra", "token_bucket", "sliding_window_log", "sliding_window_counter", "fixed_window", "suppressed"}
	got := Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
	got[0] = "changed"
	if Names()[0] != "gcra" {
		t.Fatal("Names returned shared storage")
	}
}

func TestEveryFileIsUsed(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"common": true, "prelude": true, "lean": true, "bucket": true, "lean_bucket": true, "unreadable": true, "counter": true,
		"part": true, "multi": true, "refund": true, "override": true, "lean_override": true, "lean_multi": true} // the stacked scripts (multi.go)
	for _, n := range Names() {
		known[n] = true
	}
	for _, f := range files {
		name, ok := strings.CutSuffix(f.Name(), ".lua")
		if ok && !known[name] {
			t.Errorf("%s is neither a prelude nor an algorithm", f.Name())
		}
	}
}

// TestScriptsCompile loads every script into a redis-server started for
// the test, which compiles it; a syntax error fails SCRIPT LOAD.
func TestScriptsCompile(t *testing.T) {
	addr := startRedis(t)
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for _, name := range Names() {
		for _, lean := range []bool{false, true} {
			src, err := Source(name, lean)
			if err != nil {
				t.Fatal(err)
			}
			scriptLoads(t, conn, rd, fmt.Sprintf("%s (lean %v)", name, lean), src)
		}
	}
	for _, name := range Names() {
		if name == "suppressed" {
			continue
		}
		src, err := SourceWithOverrides(name)
		if err != nil {
			t.Fatal(err)
		}
		scriptLoads(t, conn, rd, name+" with overrides", src)
	}
	// The check works: a broken script is refused.
	line, err := command(conn, rd, "SCRIPT", "LOAD", prelude+"\nlocal = 1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "-") {
		t.Fatalf("broken script: got %q, want an error", line)
	}
}

// scriptLoads checks that SCRIPT LOAD accepts src, the script called name.
func scriptLoads(t *testing.T, conn net.Conn, rd *bufio.Reader, name, src string) {
	t.Helper()
	line, err := command(conn, rd, "SCRIPT", "LOAD", src)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "$40") {
		t.Fatalf("%s: SCRIPT LOAD answered %q, want a SHA-1", name, line)
	}
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
}

// command sends args as a RESP array and returns the first reply line.
func command(conn net.Conn, rd *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return rd.ReadString('\n')
}

// startRedis starts a private redis-server for the test (package
// redistest) and returns its address.
func startRedis(t *testing.T) string {
	t.Helper()
	return redistest.Require(t).Addr
}
