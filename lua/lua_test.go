package lua

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
)

// algorithms are the algorithm names of package store, in the order of
// its Algorithm constants.
var algorithms = []string{"gcra", "token_bucket", "sliding_window_log", "sliding_window_counter", "fixed_window", "suppressed"}

// source returns the script name, failing the test when Source fails.
func source(t *testing.T, name string) string {
	t.Helper()
	src, err := Source(name)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestSource(t *testing.T) {
	for _, name := range algorithms {
		for _, lean := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lean=%v", name, lean), func(t *testing.T) {
				scriptName := name
				if lean {
					scriptName += "/lean"
				}
				src, err := Source(scriptName)
				if name == "suppressed" && lean {
					// The suppressed strategy runs its full script for every request.
					if !errors.Is(err, errUnknownScript) {
						t.Fatalf("got %v, want errUnknownScript (no lean script)", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				bucketAlg := name == "gcra" || name == "token_bucket"
				prefix := common + "\n" + unreadable + "\n" + override + "\n" + prelude
				switch {
				case lean && bucketAlg:
					prefix = common + "\n" + leanArgs
				case lean:
					prefix = common + "\n" + unreadable + "\n" + leanArgs
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
				case lean:
					file = "lean_" + name + ".lua"
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
				if !lean && !strings.Contains(string(body), "= finish(") && !strings.Contains(string(body), "return finish(") {
					t.Fatalf("%s does not answer through finish", file)
				}
			})
		}
	}
	if _, err := Source("leaky_bucket"); !errors.Is(err, errUnknownScript) {
		t.Fatalf("unknown name: got %v, want errUnknownScript", err)
	}
}

func TestLeanOverrideSources(t *testing.T) {
	for _, name := range algorithms {
		src, err := Source(name + "/lean-override")
		if name == "suppressed" {
			if !errors.Is(err, errUnknownScript) {
				t.Errorf("%s: got %v, want errUnknownScript (no lean script with overrides)", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body := leanArgs + "\n" + leanBucket
		switch name {
		case "sliding_window_log":
			body = leanArgs + "\n" + leanSlidingWindowLog
		case "sliding_window_counter":
			body = leanArgs + "\n" + counter + "\n" + leanSlidingWindowCounter
		case "fixed_window":
			body = leanArgs + "\n" + leanFixedWindowFile
		}
		want := common + "\n" + unreadable + "\n" + override + "\n" + leanOverride + "\nlocal function decide()\n" + body + "\nend\n"
		if !strings.HasPrefix(src, want) || !strings.HasSuffix(src, "return reply\n") {
			t.Errorf("%s: the script is not common, unreadable, override, lean_override and the lean script as decide, then the reply", name)
		}
	}
}

// luaComment matches a Lua line comment (the scripts have no long ones).
var luaComment = regexp.MustCompile(`--[^\n]*`)

// TestLeanBatchSources: a lean batch script is common.lua, lean_args.lua
// as the function check returning the scalars it parses, the lone lean
// script's algorithm file as the function decide of the key, the
// arguments and those scalars, with each of its two replies (admitted,
// refused) returned as values, then batch_error.lua and lean_batch.lua.
// decide must not parse again what check parsed, nor read KEYS.
func TestLeanBatchSources(t *testing.T) {
	for _, name := range algorithms {
		src, err := Source(name + "/lean-batch")
		if name == "suppressed" {
			if !errors.Is(err, errUnknownScript) {
				t.Errorf("%s: got %v, want errUnknownScript (no lean batch)", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		lone, err := Source(name + "/lean")
		if err != nil {
			t.Fatal(err)
		}
		start := common + "\n" + leanArgs + "\n"
		beforeDecide, decideStart := "", ""
		if name != "gcra" && name != "token_bucket" {
			start = common + "\n" + unreadable + "\n" + leanArgs + "\n"
			beforeDecide, decideStart = unreadable+"\n", "repaired = 0\n"
		}
		body, ok := strings.CutPrefix(lone, start)
		if !ok {
			t.Fatalf("%s: the lean script does not start with common.lua and lean_args.lua", name)
		}
		if n := len(leanReply.FindAllString(body, -1)); n != 2 {
			t.Fatalf("%s: the lean script answers in %d lines of the form return {...}, want 2", name, n)
		}
		values := repliesAsValues(body)
		want := common + "\nlocal function check(KEYS, ARGV)\n" + leanArgs + "\nreturn cost, rate, p, cap\nend\n" + beforeDecide +
			"local function decide(key, ARGV, cost, rate, p, cap)\n" + decideStart + values + "\nend\n" +
			batchError + "\n" + leanBatchDriver
		if src != want {
			t.Errorf("%s: the batch script is not common.lua, lean_args.lua as check, the algorithm file as decide, batch_error.lua and lean_batch.lua", name)
		}
		code := luaComment.ReplaceAllString(body, "")
		for _, again := range []string{"ARGV[2]", "ARGV[3]", "ARGV[5]", "tonumber(ARGV[4])", "KEYS"} {
			if strings.Contains(code, again) {
				t.Errorf("%s: the algorithm file reads %s, which the batch's check has parsed once for every request", name, again)
			}
		}
		if leanReply.MatchString(values) || strings.Contains(values, "return {") {
			t.Errorf("%s: the batch's decide still returns a table", name)
		}
		// repaired is unreadable.lua's one per-request state, which
		// decide's first line resets.
		if beforeDecide != "" && strings.Count(luaComment.ReplaceAllString(unreadable, ""), "local ") != 3 {
			t.Errorf("unreadable.lua declares other locals than repaired, repair and expire: a batch makes them once for all its requests")
		}
		if strings.Count(values, "\n") != strings.Count(body, "\n") {
			t.Errorf("%s: rewriting the replies changed the number of lines", name)
		}
	}
	// check returns the scalars lean_args.lua names.
	for _, v := range []string{"local cost, rate, p, cap = ", "local key = KEYS[1]"} {
		if !strings.Contains(leanArgs, v) {
			t.Errorf("lean_args.lua does not define %q", v)
		}
	}
	if got, want := repliesAsValues("if x then\n  return {1, f(a, b), 0}\nend\nreturn {0, g({}), 1}\nlocal t = {1}"),
		"if x then\n  return 1, f(a, b), 0\nend\nreturn 0, g({}), 1\nlocal t = {1}"; got != want {
		t.Errorf("repliesAsValues:\n%s\nwant\n%s", got, want)
	}
	// A checkout with CRLF line ends, and a reply written without the space.
	if got, want := repliesAsValues("if x then\r\n  return {1, 2}\r\nend\r\nreturn{0, 3}\r\n"),
		"if x then\r\n  return 1, 2\nend\r\nreturn 0, 3\n"; got != want {
		t.Errorf("repliesAsValues with CRLF: %q, want %q", got, want)
	}
}

func TestNames(t *testing.T) {
	var want []string
	for _, a := range algorithms {
		want = append(want, a)
		if a != "suppressed" {
			want = append(want, a+"/lean", a+"/lean-override")
		}
	}
	want = append(want, "stacked", "stacked/lean", "stacked/lean-windows", "refund")
	for _, a := range algorithms {
		if a != "suppressed" {
			want = append(want, a+"/partial")
		}
	}
	want = append(want, "fixed_window/calendar", "gcra/wait", "token_bucket/wait", "slots")
	for _, a := range algorithms {
		if a != "suppressed" {
			want = append(want, a+"/reserve")
		}
	}
	for _, a := range algorithms {
		if a != "suppressed" {
			want = append(want, a+"/lean-batch")
		}
	}
	want = append(want, "stacked/lean-batch", "stacked/lean-windows-batch")
	got := names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
	got[0] = "changed"
	if names()[0] != "gcra" {
		t.Fatal("Names returned shared storage")
	}
}

// TestEveryFileIsUsed: every .lua file of the package is part of a script
// of the table.
func TestEveryFileIsUsed(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, n := range names() {
		all.WriteString(source(t, n))
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".lua") {
			continue
		}
		text, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(all.String(), string(text)) {
			t.Errorf("%s is in no script", f.Name())
		}
	}
}

func TestStackedSource(t *testing.T) {
	src := source(t, "stacked")
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
	if source(t, "stacked") != src {
		t.Fatal("the stacked script is not stable")
	}
	if r := source(t, "refund"); !strings.HasPrefix(r, common) || !strings.HasSuffix(r, refund) {
		t.Fatal("the refund script is not common.lua and refund.lua")
	}
	if r := source(t, "stacked/lean"); r != common+"\n"+unreadable+"\n"+leanMulti {
		t.Fatal("the lean stacked script is not common.lua, unreadable.lua and lean_multi.lua")
	}
	if r := source(t, "stacked/lean-windows"); r != common+"\n"+unreadable+"\nlocal cost = 0\n"+counter+"\n"+leanMultiWindows {
		t.Fatal("the lean stacked script of window parts is not common.lua, unreadable.lua, the cost, counter.lua and lean_multi_windows.lua")
	}
	// The batches: common.lua, the rest of the lean stacked script as
	// decide, batch_error.lua and stacked_batch.lua.
	for name, lone := range map[string]string{"stacked/lean-batch": "stacked/lean", "stacked/lean-windows-batch": "stacked/lean-windows"} {
		body, ok := strings.CutPrefix(source(t, lone), common+"\n")
		if !ok {
			t.Fatalf("%s does not start with common.lua", lone)
		}
		want := common + "\nlocal function decide(KEYS, ARGV)\n" + body + "\nend\n" + batchError + "\n" + stackedBatchDriver
		if source(t, name) != want {
			t.Errorf("%s is not common.lua, the rest of %s as decide, batch_error.lua and stacked_batch.lua", name, lone)
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
	for _, name := range names() {
		scriptLoads(t, conn, rd, name, source(t, name))
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

func TestPartialSources(t *testing.T) {
	for _, a := range algorithms {
		if a == "suppressed" {
			continue
		}
		src, err := Source(a + "/partial")
		if err != nil {
			t.Fatalf("Source(%q): got error %v, want nil", a+"/partial", err)
		}
		body, err := Source(a)
		if err != nil {
			t.Fatalf("Source(%q): got error %v, want nil", a, err)
		}
		want := "local function decide()\n" + body + "\nend\n" + partialDriver
		if src != want {
			t.Errorf("%s/partial: the script is not the full script as decide, then partial.lua", a)
		}
	}
}

// TestReserveSources: a reservation script is common.lua, the rest of the
// full script as decide, then reserve.lua.
func TestReserveSources(t *testing.T) {
	for _, a := range algorithms {
		if a == "suppressed" {
			continue
		}
		src, err := Source(a + "/reserve")
		if err != nil {
			t.Fatalf("Source(%q): got error %v, want nil", a+"/reserve", err)
		}
		body, err := Source(a)
		if err != nil {
			t.Fatalf("Source(%q): got error %v, want nil", a, err)
		}
		rest, ok := strings.CutPrefix(body, common+"\n")
		if want := common + "\nlocal function decide()\n" + rest + "\nend\n" + reserveDriver; !ok || src != want {
			t.Errorf("%s/reserve: the script is not common.lua, the full script as decide, then reserve.lua", a)
		}
	}
}
