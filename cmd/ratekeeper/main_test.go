package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// policyFile is a login policy that blocks on the third attempt, a
// policy with tiers and one sharing a quota.
const policyFile = `
policies:
  login:
    key: ip
    limits:
      - {name: minute, algorithm: sliding_window_log, threshold: 3, period: 1m, block: 15m}
    count_denied: true
  api:
    classifier: plan
    tiers:
      free:
        limits:
          - {rate: 10, period: 1m}
      gold: {unlimited: true}
    overrides: true
  search:
    share: api
    cost: 2
`

// loginLimit is the login policy's limit, as the file writes it.
var loginLimit = store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Minute, Block: 15 * time.Minute}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runCLI runs the command line and returns its exit status and outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func noEnv(string) string { return "" }

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, inv *invocation)
	}{
		{"inspect with limit flags", []string{"inspect", "--policy", "api", "--tier", "free", "--rate", "5", "--period", "1m", "--algorithm", "fixed_window", "alice"}, func(t *testing.T, inv *invocation) {
			want := store.Limit{Algorithm: store.FixedWindow, Rate: 5, Period: time.Minute}
			if inv.limit != want || inv.identity != "alice" || inv.storeKey() != "api/free:alice" {
				t.Errorf("got %+v key %q, want %+v key api/free:alice", inv.limit, inv.storeKey(), want)
			}
			if inv.redisURL != "redis://127.0.0.1:6379/0" || inv.prefix != "rk" || inv.json || inv.timeout != 5*time.Second {
				t.Errorf("got defaults %q %q %v %s", inv.redisURL, inv.prefix, inv.json, inv.timeout)
			}
		}},
		{"reset with a policy file", []string{"reset", "--redis-url", "redis://h:1/2", "--prefix", "p", "--output", "json", "--policy-file", "f.yaml", "--policy", "login", "2001:db8::1"}, func(t *testing.T, inv *invocation) {
			if inv.redisURL != "redis://h:1/2" || inv.prefix != "p" || !inv.json || inv.policyFile != "f.yaml" || inv.storeKey() != "login:2001:db8::1" {
				t.Errorf("got %+v", inv)
			}
		}},
		{"blocks", []string{"blocks", "--policy", "login", "--count", "7", "--cursor", "0-12"}, func(t *testing.T, inv *invocation) {
			if inv.count != 7 || inv.cursor != "0-12" || inv.policy != "login" {
				t.Errorf("got %+v", inv)
			}
		}},
		{"check", []string{"check", "a.yaml", "b.json"}, func(t *testing.T, inv *invocation) {
			if strings.Join(inv.files, ",") != "a.yaml,b.json" {
				t.Errorf("got files %v", inv.files)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := parse(tt.args, noEnv)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			tt.check(t, inv)
		})
	}
}

func TestParseRedisURLFromEnvironment(t *testing.T) {
	inv, err := parse([]string{"blocks"}, func(k string) string {
		if k == "RATEKEEPER_REDIS_URL" {
			return "redis://env:6379/3"
		}
		return ""
	})
	if err != nil || inv.redisURL != "redis://env:6379/3" {
		t.Errorf("got %v, %v; want the URL of RATEKEEPER_REDIS_URL", inv, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command"},
		{"unknown command", []string{"flush"}, `unknown command "flush"`},
		{"unknown flag", []string{"blocks", "--all"}, "flag provided but not defined: -all"},
		{"bad output", []string{"check", "--output", "yaml", "f"}, "--output must be table or json"},
		{"no identity", []string{"inspect", "--policy", "a", "--rate", "1", "--period", "1s"}, "one identity"},
		{"IPv4-mapped identity", []string{"override", "set", "--policy", "a", "--kind", "suspend", "--ttl", "1m", "::FFFF:127.0.0.150"}, `they name it "127.0.0.150"`},
		{"unmasked prefix", []string{"reset", "--policy", "a", "--rate", "1", "--period", "1s", "2001:db8:1:2::5/64"}, `they name it "2001:db8:1:2::/64"`},
		{"two identities", []string{"reset", "--policy", "a", "--rate", "1", "--period", "1s", "x", "y"}, "one identity"},
		{"no policy", []string{"inspect", "--rate", "1", "--period", "1s", "x"}, "--policy is required"},
		{"no limits", []string{"inspect", "--policy", "a", "x"}, "give --rate and --period, or --policy-file"},
		{"both", []string{"inspect", "--policy", "a", "--policy-file", "f", "--rate", "1", "x"}, "not both"},
		{"bad algorithm", []string{"inspect", "--policy", "a", "--rate", "1", "--period", "1s", "--algorithm", "leaky", "x"}, "--algorithm"},
		{"bad period", []string{"inspect", "--policy", "a", "--rate", "1", "--period", "soon", "x"}, "invalid value"},
		{"count too high", []string{"blocks", "--count", "10001"}, "--count must be from 1 to 10000"},
		{"tier without policy", []string{"blocks", "--tier", "free"}, "--tier needs --policy"},
		{"check without files", []string{"check"}, "one or more files"},
		{"blocks with arguments", []string{"blocks", "login"}, "no arguments"},
		{"URL without a scheme", []string{"blocks", "--redis-url", "127.0.0.1:6379"}, `--redis-url (or $RATEKEEPER_REDIS_URL) "127.0.0.1:6379"`},
		{"URL with a bad database", []string{"blocks", "--redis-url", "redis://127.0.0.1:6379/abc"}, `"redis://127.0.0.1:6379/abc"`},
		{"bad cluster URL", []string{"blocks", "--cluster", "--redis-url", "http://127.0.0.1:6379"}, `"http://127.0.0.1:6379"`},
		{"timeout not above 0", []string{"inspect", "--timeout", "-1s", "--policy", "a", "--rate", "1", "--period", "1s", "x"}, "--timeout must be above 0"},
		{"zero timeout", []string{"blocks", "--timeout", "0s"}, "--timeout must be above 0"},
		{"policy with a colon", []string{"reset", "--policy", "login:2001", "--rate", "1", "--period", "1s", "db8::/64"}, `--policy "login:2001"`},
		{"tier with a slash", []string{"inspect", "--policy", "api", "--tier", "free/x", "--rate", "1", "--period", "1s", "x"}, `--tier "free/x"`},
		{"policy too long", []string{"override", "clear", "--policy", strings.Repeat("p", 65), "x"}, "1 to 64"},
		{"blocks of a bad policy", []string{"blocks", "--policy", "a b"}, `--policy "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.args, noEnv)
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a usage error containing %q", err, tt.want)
			}
			code, _, stderr := runCLI(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "usage: ratekeeper") {
				t.Errorf("got exit %d, stderr %q; want 2 with the error and the usage", code, stderr)
			}
		})
	}
}

// The CLI takes the policy and tier names the limiter takes, no others.
func TestNamesAsTheLimiterTakesThem(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"api", "a.b-c_D9", strings.Repeat("x", 64), strings.Repeat("x", 65), "a:b", "a/b", "a b", "é", "a{b}"} {
		_, lerr := limiter.New(st, limiter.Options{Name: n, Limits: []store.Limit{store.PerMinute(1)}})
		nameErr := lerr != nil && strings.Contains(lerr.Error(), "Options.Name")
		cerr := (&invocation{policy: n}).checkNames()
		if (cerr != nil) != nameErr {
			t.Errorf("%q: CLI error %v, limiter error %v", n, cerr, lerr)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"inspect", "-h"}} {
		code, stdout, _ := runCLI(t, args...)
		if code != exitOK || !strings.Contains(stdout, "usage: ratekeeper") {
			t.Errorf("%v: got exit %d, stdout %q; want 0 and the usage", args, code, stdout)
		}
	}
	if _, err := parse([]string{"help"}, noEnv); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("got %v, want flag.ErrHelp", err)
	}
}

func TestCheck(t *testing.T) {
	good := writeFile(t, "good.yaml", policyFile)
	bad := writeFile(t, "bad.yaml", "policies:\n  api:\n    key: ip\n    limits:\n      - {rate: 5, period: -1m}\n    colour: red\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")

	code, stdout, stderr := runCLI(t, "check", good)
	if code != exitOK || stdout != good+": ok\n" || stderr != "" {
		t.Errorf("good: got exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, "check", good, bad, missing)
	if code != exitFailure {
		t.Errorf("got exit %d, want 1", code)
	}
	for _, want := range []string{good + ": ok", bad + ":5: policies.api.limits[0].period:", bad + ":6: policies.api.colour:", "missing.yaml"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "2 of 3 files invalid") {
		t.Errorf("got stderr %q, want the count of invalid files", stderr)
	}

	code, stdout, _ = runCLI(t, "check", "--output", "json", good, bad)
	var results []fileResult
	if err := json.Unmarshal([]byte(stdout), &results); err != nil {
		t.Fatalf("decode %s: %v", stdout, err)
	}
	if code != exitFailure || len(results) != 2 || !results[0].Valid || results[1].Valid || len(results[1].Problems) != 2 {
		t.Fatalf("got exit %d, %+v", code, results)
	}
	if p := results[1].Problems[0]; p.Line != 5 || p.Field != "policies.api.limits[0].period" || p.Message == "" {
		t.Errorf("got %+v, want line 5, the period field and a message", p)
	}
}

func TestFileQuota(t *testing.T) {
	path := writeFile(t, "policies.yaml", policyFile)
	tests := []struct {
		policy, tier string
		owner        string
		want         []store.Limit
		err          string
	}{
		{"login", "", "login", []store.Limit{loginLimit}, ""},
		{"api", "free", "api", []store.Limit{{Rate: 10, Period: time.Minute}}, ""},
		{"search", "free", "api", []store.Limit{{Rate: 10, Period: time.Minute}}, ""},
		{"api", "", "", nil, "--tier must be one of free, gold"},
		{"api", "gold", "", nil, "stores nothing"},
		{"login", "free", "", nil, "has no tiers"},
		{"nope", "", "", nil, `no policy "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.policy+"/"+tt.tier, func(t *testing.T) {
			q, err := fileQuota(path, tt.policy, tt.tier)
			got, owner := q.limits, q.owner
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil || owner != tt.owner || len(got) != len(tt.want) || got[0] != tt.want[0] {
				t.Errorf("got %+v owner %q err %v, want %+v owner %q", got, owner, err, tt.want, tt.owner)
			}
		})
	}
	if _, err := fileQuota(writeFile(t, "bad.yaml", "policies: 3\n"), "login", ""); err == nil {
		t.Error("invalid file: got nil error")
	}
	capOnly := writeFile(t, "cap.yaml", "policies:\n  conc:\n    key: ip\n    in_flight: {max: 2}\n")
	if _, err := fileQuota(capOnly, "conc", ""); err == nil || !strings.Contains(err.Error(), "no rate limits") {
		t.Errorf("a policy with an in_flight cap only: got %v, want an error saying it has no rate limits", err)
	}
}

func TestUnreachableRedis(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for _, args := range [][]string{
		{"inspect", "--policy", "login", "--rate", "2", "--period", "1m", "x"},
		{"reset", "--policy", "login", "--rate", "2", "--period", "1m", "x"},
		{"blocks"},
	} {
		args = append(args[:1], append([]string{"--redis-url", "redis://" + addr + "/0", "--timeout", "500ms"}, args[1:]...)...)
		code, stdout, stderr := runCLI(t, args...)
		if code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, "ratekeeper "+args[0]+": ") {
			t.Errorf("%s: got exit %d, stdout %q, stderr %q; want 1 and an error", args[0], code, stdout, stderr)
		}
	}
	code, _, stderr := runCLI(t, "blocks", "--redis-url", "http://nowhere")
	if code != exitUsage || !strings.Contains(stderr, `--redis-url (or $RATEKEEPER_REDIS_URL) "http://nowhere"`) {
		t.Errorf("bad URL: got exit %d, stderr %q; want 2 naming the URL", code, stderr)
	}
}

// TestPausedRedis: against a Redis that accepts connections and answers
// nothing, a command fails once its budget (--timeout) has passed, not a
// warm-up later.
func TestPausedRedis(t *testing.T) {
	srv := redistest.Require(t)
	if err := srv.Pause(); err != nil {
		t.Skipf("cannot pause the server here: %v", err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	const budget = 300 * time.Millisecond
	for _, args := range [][]string{
		{"inspect", "--policy", "login", "--rate", "2", "--period", "1m", "x"},
		{"blocks"},
	} {
		args = append(args[:1], append([]string{"--redis-url", "redis://" + srv.Addr + "/0", "--timeout", budget.String()}, args[1:]...)...)
		start := time.Now()
		code, stdout, stderr := runCLI(t, args...)
		took := time.Since(start)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "timeout") {
			t.Errorf("%s: got exit %d, stdout %q, stderr %q; want 1 and a timeout", args[0], code, stdout, stderr)
		}
		// The store's warm-up alone would wait a second.
		if took < budget || took > budget+700*time.Millisecond {
			t.Errorf("%s: took %v, want the budget of %v and less than 700ms more", args[0], took, budget)
		}
	}
}

// blockClient gets identity blocked under the login policy, as three
// failed logins through the middleware would.
func blockClient(t *testing.T, c *redis.Client, prefix, identity string) {
	t.Helper()
	st, err := redisstore.New(c, redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := store.Request{Key: "login:" + identity, Limits: []store.Limit{loginLimit}, CountDenied: true}
	for range 3 {
		if _, err := st.Take(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAgainstRedis(t *testing.T) {
	srv := requireServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	prefix := randomPrefix(t)
	path := writeFile(t, "policies.yaml", policyFile)
	conn := []string{"--redis-url", "redis://" + srv.Addr + "/0", "--prefix", prefix}
	cmd := func(name string, args ...string) []string {
		return append(append([]string{name}, conn...), args...)
	}

	blockClient(t, c, prefix, "203.0.113.7")
	blockClient(t, c, prefix, "2001:db8::1")
	// A client of another policy whose name starts with "login".
	st, _ := redisstore.New(c, redisstore.Options{Prefix: prefix})
	other := store.Request{Key: "loginx:198.51.100.1", Limits: []store.Limit{loginLimit}, CountDenied: true}
	for range 3 {
		if _, err := st.Take(context.Background(), other); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("blocks", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, cmd("blocks", "--policy", "login", "--output", "json")...)
		if code != exitOK {
			t.Fatalf("got exit %d, stderr %q", code, stderr)
		}
		var got struct {
			Clients []blockedClient `json:"clients"`
			Cursor  string          `json:"cursor"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("decode %s: %v", stdout, err)
		}
		if len(got.Clients) != 2 || got.Cursor != "" {
			t.Fatalf("got %+v, want the two login clients and no cursor", got)
		}
		if c := got.Clients[0]; c.Policy != "login" || c.Identity != "2001:db8::1" || c.Scope != "minute" || c.Tier != "" {
			t.Errorf("got %+v, want login's 2001:db8::1 blocked by minute", c)
		}
		code, stdout, _ = runCLI(t, cmd("blocks")...)
		if code != exitOK || strings.Count(stdout, "\n") != 4 || !strings.HasPrefix(stdout, "POLICY") || !strings.Contains(stdout, "loginx") {
			t.Errorf("all policies: got exit %d, table\n%s", code, stdout)
		}
		// One at a time, following the cursor, until the listing ends.
		seen := map[string]bool{}
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("the listing does not end")
			}
			args := cmd("blocks", "--count", "1", "--output", "json")
			if cursor != "" {
				args = append(args, "--cursor", cursor)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("page %d: got exit %d, stderr %q", pages, code, stderr)
			}
			var page struct {
				Clients []blockedClient `json:"clients"`
				Cursor  string          `json:"cursor"`
			}
			if err := json.Unmarshal([]byte(stdout), &page); err != nil {
				t.Fatalf("decode %s: %v", stdout, err)
			}
			for _, c := range page.Clients {
				seen[c.Policy+":"+c.Identity] = true
			}
			if cursor = page.Cursor; cursor == "" {
				break
			}
		}
		if len(seen) != 3 {
			t.Errorf("paging: got %v, want the three blocked clients", seen)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, cmd("inspect", "--output", "json", "--policy-file", path, "--policy", "login", "203.0.113.7")...)
		if code != exitOK {
			t.Fatalf("got exit %d, stderr %q", code, stderr)
		}
		var got clientState
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("decode %s: %v", stdout, err)
		}
		if !got.Blocked || got.BlockedUntil == nil || got.Key != "login:203.0.113.7" || got.Remaining != 0 || got.Limit != "minute" {
			t.Errorf("got %+v, want login:203.0.113.7 blocked", got)
		}
		if d := time.Until(*got.BlockedUntil); d < 14*time.Minute || d > 15*time.Minute {
			t.Errorf("got blocked until %s (in %s), want within 15 minutes", got.BlockedUntil, d)
		}
		// The same with limit flags, as a table.
		code, stdout, _ = runCLI(t, cmd("inspect", "--policy", "login", "--name", "minute", "--algorithm", "sliding_window_log", "--rate", "2", "--period", "1m", "--block", "15m", "203.0.113.7")...)
		if code != exitOK || !strings.Contains(stdout, "login:203.0.113.7") || !strings.Contains(stdout, "true") {
			t.Errorf("table: got exit %d\n%s", code, stdout)
		}
		// A fresh client has everything left and nothing to wait for (the
		// reset was a window in the future: the state after a hypothetical
		// request).
		code, stdout, _ = runCLI(t, cmd("inspect", "--output", "json", "--policy-file", path, "--policy", "login", "192.0.2.55")...)
		got = clientState{}
		_ = json.Unmarshal([]byte(stdout), &got)
		if code != exitOK || got.Blocked || got.Remaining != 2 || got.Capacity != 2 || got.Reset.After(time.Now()) {
			t.Errorf("fresh client: got exit %d, %+v; want 2 of 2 left and a reset not in the future", code, got)
		}
		// One attempt used: the window runs from that attempt, not from
		// the inspection 200 ms later.
		before := time.Now()
		if _, err := st.Take(context.Background(), store.Request{Key: "login:192.0.2.56", Limits: []store.Limit{loginLimit}, CountDenied: true}); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		time.Sleep(200 * time.Millisecond)
		code, stdout, _ = runCLI(t, cmd("inspect", "--output", "json", "--policy-file", path, "--policy", "login", "192.0.2.56")...)
		got = clientState{}
		_ = json.Unmarshal([]byte(stdout), &got)
		if code != exitOK || got.Remaining != 1 || got.Reset.Before(before.Add(time.Minute-time.Second)) || got.Reset.After(after.Add(time.Minute+time.Millisecond)) {
			t.Errorf("one used: got exit %d, %+v; want 1 left and a reset a minute after the attempt (between %s and %s)", code, got, before.Add(time.Minute), after.Add(time.Minute))
		}
	})

	t.Run("reset", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, cmd("reset", "--policy-file", path, "--policy", "login", "203.0.113.7")...)
		if code != exitOK || stdout != "reset login:203.0.113.7\n" {
			t.Fatalf("got exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		d, err := st.Take(context.Background(), store.Request{Key: "login:203.0.113.7", Limits: []store.Limit{loginLimit}, CountDenied: true})
		if err != nil || !d.Allowed {
			t.Errorf("after the reset: got %+v, %v; want admitted", d, err)
		}
		code, _, stderr = runCLI(t, cmd("reset", "--policy-file", path, "--policy", "login", "192.0.2.200")...)
		if code != exitFailure || !strings.Contains(stderr, `nothing stored for "login:192.0.2.200"`) {
			t.Errorf("unknown client: got exit %d, stderr %q; want 1 and nothing stored", code, stderr)
		}
		code, stdout, _ = runCLI(t, cmd("blocks", "--policy", "login")...)
		if code != exitOK || strings.Contains(stdout, "203.0.113.7") || !strings.Contains(stdout, "2001:db8::1") {
			t.Errorf("blocks after the reset: got exit %d\n%s", code, stdout)
		}
	})
}

// TestOverrideAgainstRedis: override set raises one client's limit, as
// the scripts apply it, while another stays limited; inspect shows the
// override; override clear removes it; a suspension refuses; the errors.
func TestOverrideAgainstRedis(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	prefix := randomPrefix(t)
	path := writeFile(t, "policies.yaml", policyFile)
	conn := []string{"--redis-url", "redis://" + srv.Addr + "/0", "--prefix", prefix}
	cmd := func(name string, args ...string) []string {
		return append(append(strings.Fields(name), conn...), args...)
	}
	st, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	free := store.Limit{Rate: 10, Period: time.Minute}
	take := func(identity string) store.Decision {
		t.Helper()
		d, err := st.Take(ctx, store.Request{Key: "api/free:" + identity, Limits: []store.Limit{free}, ApplyOverride: true})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// search shares api's quota: its override is api's.
	code, stdout, stderr := runCLI(t, cmd("override set", "--policy-file", path, "--policy", "search", "--tier", "free", "--kind", "raise", "--scale", "3", "--ttl", "1h", "--output", "json", "alice")...)
	if code != exitOK {
		t.Fatalf("set: got exit %d, stderr %q", code, stderr)
	}
	var line overrideLine
	if err := json.Unmarshal([]byte(stdout), &line); err != nil || line.Key != "api/free:alice" || line.Kind != "scale" || line.Scale != 3 || line.Expires == nil {
		t.Fatalf("set: got %q (%v), want scale 3 on api/free:alice", stdout, err)
	}
	admitted := 0
	for range 40 {
		if take("alice").Allowed {
			admitted++
		}
	}
	if admitted != 30 {
		t.Errorf("raised client: got %d admitted, want 30", admitted)
	}
	admitted = 0
	for range 20 {
		if take("bob").Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("other client: got %d admitted, want 10", admitted)
	}
	code, stdout, _ = runCLI(t, cmd("inspect", "--policy-file", path, "--policy", "api", "--tier", "free", "--output", "json", "alice")...)
	var got clientState
	if err := json.Unmarshal([]byte(stdout), &got); code != exitOK || err != nil || got.Override != "scale:3" || got.Capacity != 30 || got.OverrideEnds == nil {
		t.Errorf("inspect: got exit %d, %+v; want the override and capacity 30", code, got)
	}

	code, _, stderr = runCLI(t, cmd("override set", "--policy-file", path, "--policy", "login", "--kind", "exempt", "--ttl", "1h", "203.0.113.7")...)
	if code != exitFailure || !strings.Contains(stderr, "does not apply overrides") {
		t.Errorf("a policy without overrides: got exit %d, stderr %q; want 1 and an explanation", code, stderr)
	}

	code, stdout, stderr = runCLI(t, cmd("override clear", "--policy", "api", "--tier", "free", "alice")...)
	if code != exitOK || stdout != "cleared the override of api/free:alice\n" {
		t.Fatalf("clear: got exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if d := take("alice"); d.Allowed || d.Capacity != 10 || d.Override != store.OverrideNone {
		t.Errorf("after clear: got %+v, want refused under the limit of 10", d)
	}
	code, _, stderr = runCLI(t, cmd("override clear", "--policy", "api", "--tier", "free", "alice")...)
	if code != exitFailure || !strings.Contains(stderr, "no override stored") {
		t.Errorf("second clear: got exit %d, stderr %q; want 1 and no override stored", code, stderr)
	}

	code, stdout, _ = runCLI(t, cmd("override set", "--policy", "api", "--tier", "free", "--kind", "suspend", "--ttl", "10m", "carol")...)
	if code != exitOK || !strings.HasPrefix(stdout, "override of api/free:carol: suspend until ") {
		t.Fatalf("suspend: got exit %d, %q", code, stdout)
	}
	if d := take("carol"); d.Allowed || d.Override != store.OverrideSuspend || d.RetryAfter < 9*time.Minute {
		t.Errorf("suspended client: got %+v, want refused for about 10 minutes", d)
	}
	if o, err := st.(store.OverrideStore).GetOverride(ctx, limiter.StoreKey("api", "free", "carol")); err != nil || o.TTL <= 9*time.Minute || o.TTL > 10*time.Minute {
		t.Errorf("override in the store: got %+v, error %v; want one that lasts about 10m", o, err)
	}

	for _, args := range [][]string{
		{"override"},
		{"override", "show", "alice"},
		{"override", "set", "--policy", "api", "--kind", "raise", "--scale", "0.5", "--ttl", "1h", "alice"},
		{"override", "set", "--policy", "api", "--kind", "cut", "--scale", "2", "--ttl", "1h", "alice"},
		{"override", "set", "--policy", "api", "--kind", "exempt", "alice"},
		{"override", "set", "--policy", "api", "--kind", "nap", "--ttl", "1h", "alice"},
		{"override", "set", "--kind", "exempt", "--ttl", "1h", "alice"},
		{"override", "set", "--policy", "api", "--kind", "exempt", "--ttl", "1h"},
		{"override", "clear", "--policy", "api"},
	} {
		if code, _, _ := runCLI(t, args...); code != exitUsage {
			t.Errorf("%q: got exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestCommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"inspect", "--help"}, []string{"usage: ratekeeper inspect [flags] IDENTITY\n", "-policy-file", "-rate"}},
		{[]string{"override", "set", "-h"}, []string{"usage: ratekeeper override set [flags] IDENTITY\n", "-kind", "-ttl"}},
		{[]string{"blocks", "--help"}, []string{"usage: ratekeeper blocks [flags]\n", "-cursor", "-count"}},
		{[]string{"check", "--help"}, []string{"usage: ratekeeper check [flags] FILE...\n", "-output"}},
		{[]string{"version", "--help"}, []string{"usage: ratekeeper version\n"}},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != exitOK || stderr != "" {
			t.Errorf("%v: got exit %d, stderr %q; want 0 and nothing", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: got %q, want it to contain %q", tc.args, stdout, w)
			}
		}
		if strings.Contains(stdout, "Commands:") {
			t.Errorf("%v: got the whole usage, want the command's own", tc.args)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "version")
	if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, "ratekeeper ") || !strings.Contains(stdout, " go1.") {
		t.Errorf("version: got exit %d, stdout %q, stderr %q; want 0 and \"ratekeeper <version> <go version>\"", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "version", "extra"); code != exitUsage {
		t.Errorf("version extra: got exit %d, want %d", code, exitUsage)
	}
}
