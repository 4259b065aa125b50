package policy_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// appOptions registers what test files name: the key function "ip" and
// the classifier "auth" (an AuthOptions without Trusted or Suspended
// hooks, so it needs the tiers anonymous and authenticated).
func appOptions() policy.Options {
	subject := func(r *http.Request) (string, error) {
		if sub, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && sub != "" {
			return sub, nil
		}
		return "", keyfunc.ErrNoIdentity
	}
	return policy.Options{
		Keys:        map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Classifiers: map[string]middleware.Classifier{"auth": middleware.AuthOptions{Subject: subject, Anonymous: keyfunc.RemoteIP}},
		Logger:      slog.New(slog.DiscardHandler),
	}
}

func TestInvalidFiles(t *testing.T) {
	tests := []struct {
		name  string
		file  string // "x.yaml" unless it ends in .json
		text  string
		line  int
		field string
		msg   string
	}{
		{"rate is a string", "", `
policies:
  api:
    key: ip
    limits:
      - {rate: "10", period: 1m}
`, 6, "policies.api.limits[0].rate", `must be a whole number, got the string "10"`},
		{"rate is a fraction", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 1.5
        period: 1m
`, 6, "policies.api.limits[0].rate", "must be a whole number, got the number 1.5"},
		{"rate overflows", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 99999999999999999999
        period: 1m
`, 6, "policies.api.limits[0].rate", "must be a whole number"},
		{"zero rate", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 0
        period: 1m
`, 6, "policies.api.limits[0].rate", "must be at least 1, got 0"},
		{"period without a unit", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 10
        period: 60
`, 7, "policies.api.limits[0].period", "must be a duration with a unit"},
		{"negative period", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 10
        period: -1m
`, 7, "policies.api.limits[0].period", "must be positive, got -1m"},
		{"period below a millisecond", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 10
        period: 1500us
`, 7, "policies.api.limits[0].period", "must be whole milliseconds"},
		{"period too long", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 10
        period: 100000h
`, 6, "policies.api.limits[0]", "Period must be <="},
		{"unknown top-level field", "", `
version: 1
polices:
  api: {}
`, 3, "polices", "unknown field (known: version, policies)"},
		{"unknown policy field", "", `
policies:
  api:
    key: ip
    dryrun: true
    limits: [{rate: 10, period: 1m}]
`, 5, "policies.api.dryrun", "unknown field"},
		{"unknown limit field", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 10
        period: 1m
        brust: 20
`, 8, "policies.api.limits[0].brust", "unknown field"},
		{"cost above capacity", "", `
policies:
  api:
    key: ip
    cost: 11
    limits:
      - {rate: 10, period: 1m}
`, 5, "policies.api.cost", "11 exceeds the capacity 10 of policies.api.limits[0]"},
		{"shared cost above capacity", "", `
policies:
  api:
    key: ip
    limits:
      - {rate: 10, period: 1m, burst: 4}
  search:
    share: api
    cost: 5
`, 9, "policies.search.cost", `5 exceeds the capacity 4 of a limit of "api"`},
		{"unknown algorithm", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 10
        period: 1m
        algorithm: leaky_bucket
`, 8, "policies.api.limits[0].algorithm", `unknown algorithm "leaky_bucket" (want gcra, token_bucket`},
		{"duplicate policy names", "", `
policies:
  api:
    key: ip
    limits: [{rate: 10, period: 1m}]
  api:
    key: ip
    limits: [{rate: 20, period: 1m}]
`, 6, "policies.api", "defined twice (first at line 3)"},
		{"duplicate tier names", "", `
policies:
  api:
    classifier: auth
    tiers:
      anonymous: {limits: [{rate: 10, period: 1m}]}
      authenticated: {limits: [{rate: 100, period: 1m}]}
      anonymous: {limits: [{rate: 20, period: 1m}]}
`, 8, "policies.api.tiers.anonymous", "defined twice (first at line 6)"},
		{"duplicate limit names", "", `
policies:
  api:
    key: ip
    limits:
      - {rate: 10, period: 1m}
      - {rate: 100, period: 1m}
`, 7, "policies.api.limits[1]", `has the same name "gcra/1m0s" as policies.api.limits[0]`},
		{"missing tier", "", `
policies:
  api:
    classifier: auth
    tiers:
      anonymous:
        limits: [{rate: 10, period: 1m}]
`, 5, "policies.api.tiers", `no tier "authenticated", which classifier "auth" can give a request`},
		{"unknown key function", "", `
policies:
  api:
    key: subject
    limits: [{rate: 10, period: 1m}]
`, 4, "policies.api.key", `unknown key function "subject" (the application registers: ip)`},
		{"unknown classifier", "", `
policies:
  api:
    classifier: jwt
    tiers:
      anonymous: {limits: [{rate: 10, period: 1m}]}
`, 4, "policies.api.classifier", `unknown classifier "jwt" (the application registers: auth)`},
		{"key and classifier", "", `
policies:
  api:
    key: ip
    classifier: auth
    limits: [{rate: 10, period: 1m}]
`, 3, "policies.api", "exclude each other"},
		{"neither key nor classifier", "", `
policies:
  api:
    limits: [{rate: 10, period: 1m}]
`, 3, "policies.api", "needs one of key (with limits), classifier (with tiers) or share"},
		{"key without limits", "", `
policies:
  api:
    key: ip
`, 3, "policies.api.limits", "required with key"},
		{"empty limits", "", `
policies:
  api:
    key: ip
    limits: []
`, 5, "policies.api.limits", "must hold at least one limit"},
		{"limits is a mapping", "", `
policies:
  api:
    key: ip
    limits:
      rate: 10
`, 6, "policies.api.limits", "must be a list, got a mapping"},
		{"share of an unknown policy", "", `
policies:
  search:
    share: api
    cost: 5
`, 4, "policies.search.share", `names the unknown policy "api"`},
		{"share of a sharing policy", "", `
policies:
  api:
    key: ip
    limits: [{rate: 10, period: 1m}]
  search:
    share: api
  export:
    share: search
`, 9, "policies.export.share", `names "search", which shares "api" itself`},
		{"share with limits", "", `
policies:
  api:
    key: ip
    limits: [{rate: 10, period: 1m}]
  search:
    share: api
    limits: [{rate: 10, period: 1m}]
`, 8, "policies.search.limits", "not allowed with share"},
		{"tier with limits and unlimited", "", `
policies:
  api:
    classifier: auth
    tiers:
      anonymous:
        limits: [{rate: 10, period: 1m}]
        unlimited: true
      authenticated: {unlimited: true}
`, 6, "policies.api.tiers.anonymous", "needs exactly one of limits, unlimited: true or suspended: true"},
		{"burst on a window algorithm", "", `
policies:
  api:
    key: ip
    limits:
      - algorithm: fixed_window
        rate: 10
        period: 1m
        burst: 20
`, 9, "policies.api.limits[0].burst", "only gcra, token_bucket and suppressed have a burst"},
		{"suppressed hard limit below its rate", "", `
policies:
  api:
    key: ip
    limits:
      - algorithm: suppressed
        rate: 10
        period: 1m
        burst: 5
`, 6, "policies.api.limits[0]", "Burst (the hard limit of suppressed) must be 0 or >= Rate 10, got 5"},
		{"suppressed with a block", "", `
policies:
  api:
    key: ip
    limits:
      - algorithm: suppressed
        rate: 10
        period: 1m
        block: 1m
`, 6, "policies.api.limits[0]", "Block is not supported by suppressed"},
		{"block_max without block", "", `
policies:
  login:
    key: ip
    limits:
      - rate: 5
        period: 1m
        block_max: 1h
`, 8, "policies.login.limits[0].block_max", "needs block"},
		{"calendar and period", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 1000
        calendar: month
        period: 1h
`, 8, "policies.api.limits[0].period", "excludes calendar"},
		{"unknown calendar", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 1000
        calendar: fortnight
`, 7, "policies.api.limits[0].calendar", `unknown calendar "fortnight"`},
		{"unknown time zone", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 1000
        calendar: day
        timezone: Mars/Olympus
`, 8, "policies.api.limits[0].timezone", `unknown time zone "Mars/Olympus"`},
		{"time zone without calendar", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 1000
        period: 1h
        timezone: Europe/Berlin
`, 8, "policies.api.limits[0].timezone", "needs calendar"},
		{"calendar of another algorithm", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 1000
        algorithm: gcra
        calendar: day
`, 6, "policies.api.limits[0]", "Calendar needs the fixed_window algorithm"},
		{"negative block", "", `
policies:
  login:
    key: ip
    limits:
      - rate: 5
        period: 1m
        block: -15m
`, 8, "policies.login.limits[0].block", "must be zero or positive, got -15m"},
		{"max_wait with a fixed window", "", `
policies:
  api:
    key: ip
    max_wait: 2s
    limits: [{rate: 5, period: 1m, algorithm: fixed_window}]
`, 5, "policies.api.max_wait", "needs gcra or token_bucket limits, not fixed_window"},
		{"max_wait with overrides", "", `
policies:
  api:
    key: ip
    max_wait: 2s
    overrides: true
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.max_wait", "cannot be combined with overrides"},
		{"negative max_wait", "", `
policies:
  api:
    key: ip
    max_wait: -2s
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.max_wait", "must be zero or positive, got -2s"},
		{"max_wait without a unit", "", `
policies:
  api:
    key: ip
    max_wait: 2
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.max_wait", "must be a duration with a unit"},
		{"count_denied with gcra", "", `
policies:
  login:
    key: ip
    count_denied: true
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.login.count_denied", "needs a window algorithm"},
		{"mixed algorithms", "", `
policies:
  api:
    key: ip
    limits:
      - {name: a, rate: 5, period: 1m}
      - {name: b, rate: 50, period: 1h, algorithm: fixed_window}
`, 7, "policies.api.limits[1].algorithm", "the limits of one policy or tier use one algorithm"},
		{"too many limits", "", `
policies:
  api:
    key: ip
    limits:
      - {name: a, rate: 1, period: 1s}
      - {name: b, rate: 1, period: 1s}
      - {name: c, rate: 1, period: 1s}
      - {name: d, rate: 1, period: 1s}
      - {name: e, rate: 1, period: 1s}
      - {name: f, rate: 1, period: 1s}
      - {name: g, rate: 1, period: 1s}
      - {name: h, rate: 1, period: 1s}
      - {name: i, rate: 1, period: 1s}
`, 5, "policies.api.limits", "holds 9 limits, at most 8"},
		{"rate and threshold", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 5
        threshold: 6
        period: 1m
`, 7, "policies.api.limits[0].threshold", "excludes rate"},
		{"threshold of 1", "", `
policies:
  api:
    key: ip
    limits:
      - threshold: 1
        period: 1m
`, 6, "policies.api.limits[0].threshold", "must be at least 2, got 1"},
		{"limit without period", "", `
policies:
  api:
    key: ip
    limits:
      - rate: 5
`, 6, "policies.api.limits[0].period", "required"},
		{"invalid policy name", "", `
policies:
  "api v2":
    key: ip
    limits: [{rate: 5, period: 1m}]
`, 3, "policies.api v2", "policy name \"api v2\": only A-Z"},
		{"unknown mode", "", `
policies:
  api:
    key: ip
    mode: shadow
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.mode", `unknown mode "shadow" (want enforce, dry_run or off)`},
		{"unknown header dialect", "", `
policies:
  api:
    key: ip
    headers: {dialect: draft-7}
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.headers.dialect", `unknown dialect "draft-7"`},
		{"unknown failure mode", "", `
policies:
  api:
    key: ip
    failure: fallback
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.failure", `unknown failure mode "fallback" (want open or closed)`},
		{"invalid exempt CIDR", "", `
policies:
  api:
    key: ip
    limits: [{rate: 5, period: 1m}]
    exempt:
      cidrs:
        - 10.0.0.0/8
        - 10.0.0.0/33
`, 9, "policies.api.exempt.cidrs[1]", `must be a CIDR prefix such as 10.0.0.0/8 or an address, got "10.0.0.0/33"`},
		{"breaker without cooldown", "", `
policies:
  api:
    key: ip
    limits: [{rate: 5, period: 1m}]
    breaker:
      threshold: 3
`, 7, "policies.api.breaker", "needs threshold (0 turns the breaker off) and, unless it is 0, cooldown"},
		{"fallback without a store", "", `
policies:
  api:
    key: ip
    local_fallback: true
    limits: [{rate: 5, period: 1m}]
`, 5, "policies.api.local_fallback", "needs a fallback store"},
		{"wrong version", "", `
version: 2
policies:
  api:
    key: ip
    limits: [{rate: 5, period: 1m}]
`, 2, "version", "must be 1, got 2"},
		{"policies is a list", "", `
policies:
  - api
`, 3, "policies", "must be a mapping, got a list"},
		{"no policies", "", `
version: 1
`, 2, "policies", "required"},
		{"empty file", "", "", 0, "policies", "required"},
		{"merge key", "", `
policies:
  api:
    key: ip
    limits:
      - &d {name: a, rate: 5, period: 1m}
      - <<: *d
        name: b
`, 7, "policies.api.limits[1].<<", "merge keys are not supported"},
		{"YAML syntax", "", `
policies:
  api:
    key: ip
    limits:
      - {rate: 5, period: @}
`, 6, "", "invalid YAML: found character that cannot start any token"},
		{"two YAML documents", "", `
policies:
  api: {key: ip, limits: [{rate: 5, period: 1m}]}
---
policies: {}
`, 4, "", "one YAML document"},
		{"JSON syntax", "p.json", `{
  "policies": {
    "api": {
      "key": "ip",
      "limits": [{"rate": 5, "period": "1m"},]
    }
  }
}`, 5, "", "invalid JSON"},
		{"JSON wrong type", "p.json", `{
  "policies": {
    "api": {
      "key": "ip",
      "limits": [
        {"rate": "5", "period": "1m"}
      ]
    }
  }
}`, 6, "policies.api.limits[0].rate", `must be a whole number, got the string "5"`},
		{"JSON unknown field", "p.json", `{
	"policies": {
		"api": {
			"key": "ip",
			"limits": [{"rate": 5, "period": "1m"}],
			"dry_run": true
		}
	}
}`, 6, "policies.api.dry_run", "unknown field"},
		{"JSON duplicate names", "p.json", `{"policies": {
  "api": {"key": "ip", "limits": [{"rate": 5, "period": "1m"}]},
  "api": {"key": "ip", "limits": [{"rate": 9, "period": "1m"}]}
}}`, 3, "policies.api", "defined twice (first at line 2)"},
		{"JSON trailing data", "p.json", `{"policies": {}}
{}`, 2, "", "invalid JSON"},
	}
	if len(tests) < 15 {
		t.Fatalf("got %d cases, want at least 15", len(tests))
	}
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file == "" {
				file = "x.yaml"
			}
			// Lines count from the literal's first line, the empty one
			// after the backquote for YAML.
			_, err := policy.New(file, []byte(tt.text), st, appOptions())
			checkError(t, err, file, tt.line, tt.field, tt.msg)
		})
	}
}

// checkError asserts that err's first problem is an *policy.Error at line
// about field whose message contains msg, and that its text names all
// three.
func checkError(t *testing.T, err error, file string, line int, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want one")
	}
	var pe *policy.Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %T %q, want a *policy.Error", err, err)
	}
	if pe.File != file || pe.Line != line || pe.Field != field || !strings.Contains(pe.Msg, msg) {
		t.Fatalf("got %q (file %q, line %d, field %q), want file %q, line %d, field %q, a message containing %q", err, pe.File, pe.Line, pe.Field, file, line, field, msg)
	}
	want := file + ":"
	if line > 0 {
		want += fmt.Sprint(line) + ":"
	}
	if field != "" {
		want += " " + field + ":"
	}
	if !strings.HasPrefix(pe.Error(), want) {
		t.Errorf("got %q, want it to start with %q", pe.Error(), want)
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	const text = `policies:
  api:
    key: ip
    limits:
      - {rate: -1, period: 1m}
      - {rate: 1, period: 1x}
  login:
    key: ip
    colour: red
    limits: [{rate: 1, period: 1s}]
`
	_, err := policy.Parse("x.yaml", []byte(text))
	var lines []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *policy.Error
		if !errors.As(e, &pe) {
			t.Fatalf("got %T, want *policy.Error", e)
		}
		lines = append(lines, pe.Line)
	}
	if fmt.Sprint(lines) != "[5 6 9]" {
		t.Fatalf("got problems on lines %v, want [5 6 9]: %v", lines, err)
	}
}

// A document of nested aliases that would expand to billions of values is
// refused after a bounded amount of work.
func TestAliasBombIsBounded(t *testing.T) {
	text := "a: &a [{rate: 1, period: 1s}]\n"
	prev := "a"
	for i := range 20 {
		name := fmt.Sprintf("l%d", i)
		text += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	text += "policies:\n  api:\n    key: ip\n    limits: *" + prev + "\n"
	start := time.Now()
	_, err := policy.Parse("bomb.yaml", []byte(text))
	if err == nil {
		t.Fatal("got no error, want one")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

// The documented examples are valid: the package documentation's and the
// files shipped in testdata.
func TestValidFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("got %d files in testdata, want at least 2", len(files))
	}
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := policy.Load(f, st, appOptions()); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := policy.Parse(f, data); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// JSON and YAML are one schema: the same policies read from either format
// are the same.
func TestJSONAndYAMLAgree(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	y, err := policy.Load("testdata/full.yaml", st, appOptions())
	if err != nil {
		t.Fatal(err)
	}
	j, err := policy.Load("testdata/full.json", st, appOptions())
	if err != nil {
		t.Fatal(err)
	}
	ys, js := y.Status().Policies, j.Status().Policies
	if len(ys) != len(js) {
		t.Fatalf("got %d YAML and %d JSON policies", len(ys), len(js))
	}
	for i := range ys {
		if ys[i].Name != js[i].Name || string(ys[i].Config) != string(js[i].Config) {
			t.Errorf("policy %d: YAML %s %s, JSON %s %s", i, ys[i].Name, ys[i].Config, js[i].Name, js[i].Config)
		}
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.*")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Base(name), data)
	}
	f.Add("x.json", []byte(`{"policies": {"a": {"key": "ip", "limits": [{"rate": 1, "period": "1s"}]}}}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		_, err := policy.Parse(name, data)
		if err == nil {
			return
		}
		var pe *policy.Error
		if !errors.As(err, &pe) {
			t.Fatalf("got %T %q, want a *policy.Error", err, err)
		}
		if pe.Line < 0 || pe.Msg == "" {
			t.Fatalf("got %+v", pe)
		}
	})
}

// Parse returns the one decoded form: a threshold N is rate N-1, tiers
// keep their order, and a policy with share carries the shared policy's
// limits and overrides.
func TestParseForm(t *testing.T) {
	ps, err := policy.Parse("p.yaml", []byte(`policies:
  api:
    classifier: auth
    overrides: true
    tiers:
      anonymous: {limits: [{rate: 10, period: 1m}]}
      trusted: {unlimited: true}
  search: {share: api, cost: 5}
  login:
    key: ip
    mode: dry_run
    limits:
      - {name: minute, threshold: 6, period: 1m, algorithm: sliding_window_log}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 {
		t.Fatalf("got %d policies, want 3", len(ps))
	}
	api, search, login := ps[0], ps[1], ps[2]
	if api.Name != "api" || api.Classifier != "auth" || !api.Overrides || api.Cost != 1 || api.Mode != "enforce" || len(api.Tiers) != 2 ||
		api.Tiers[0].Name != "anonymous" || api.Tiers[0].Limits[0].Rate != 10 || !api.Tiers[1].Unlimited || api.Limits != nil {
		t.Errorf("api: got %+v", api)
	}
	if search.Share != "api" || search.Cost != 5 || search.Classifier != "auth" || !search.Overrides || len(search.Tiers) != 2 {
		t.Errorf("search: got %+v, want api's tiers and overrides", search)
	}
	if string(search.Config) != `{"share":"api","cost":5,"mode":"enforce"}` {
		t.Errorf("search config: got %s", search.Config)
	}
	want := store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute}
	if login.Key != "ip" || login.Mode != "dry_run" || login.Configured != "dry_run" || len(login.Limits) != 1 || login.Limits[0] != want || login.Tiers != nil {
		t.Errorf("login: got %+v, want one limit %+v", login, want)
	}
}
