package middleware

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// writeFor writes the headers a limiter configured with w would write for
// sd under limits, decided at now.
func writeFor(t *testing.T, w headers.Writer, policy string, limits []store.Limit, sd store.Decision, now time.Time) http.Header {
	t.Helper()
	set, err := compileLimits(w, policy, limits, false)
	if err != nil {
		t.Fatal(err)
	}
	q := &quota{hdr: w}
	ts := &tierState{policy: policy, bucketHdr: []string{policy}}
	d := Decision{Decision: sd, Reset: now.Add(resetAfter(&sd)), t: ts, set: set}
	h := http.Header{}
	q.writeHeaders(h, &d, new(hdrBuf), !sd.Allowed)
	return h
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int64
	}{
		{0, 1},
		{-time.Second, 1},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{16*time.Second + 1, 17},
		{17 * time.Second, 17},
		{time.Hour, 3600},
	}
	for _, tt := range tests {
		if got := retryAfterSeconds(tt.in); got != tt.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestWriteHeaders(t *testing.T) {
	now := time.Unix(1767225600, 250_000_000)
	limits := []store.Limit{store.PerMinute(10)}
	tests := []struct {
		name string
		w    headers.Writer
		d    store.Decision
		want map[string]string
	}{
		{
			name: "allowed epoch",
			d:    store.Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 18 * time.Second},
			want: map[string]string{hdrLimit: "10", hdrRemaining: "7", hdrReset: "1767225619", hdrRetryAfter: ""},
		},
		{
			name: "allowed delta",
			w:    headers.Writer{ResetDelta: true},
			d:    store.Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 18*time.Second + 1},
			want: map[string]string{hdrLimit: "10", hdrRemaining: "7", hdrReset: "19", hdrRetryAfter: ""},
		},
		{
			name: "denied uses retry for reset",
			d:    store.Decision{Allowed: false, Limit: 10, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 16*time.Second + 500*time.Millisecond},
			want: map[string]string{hdrLimit: "10", hdrRemaining: "0", hdrReset: "1767225617", hdrRetryAfter: "17"},
		},
		{
			name: "denied sub-second retry is one second",
			w:    headers.Writer{ResetDelta: true},
			d:    store.Decision{Allowed: false, Limit: 5, RetryAfter: time.Millisecond},
			want: map[string]string{hdrLimit: "5", hdrRemaining: "0", hdrReset: "1", hdrRetryAfter: "1"},
		},
		{
			name: "limit of a block by a limit outside the request",
			d:    store.Decision{Allowed: false, Blocked: true, Limit: 3, Index: -1, RetryAfter: time.Minute},
			want: map[string]string{hdrLimit: "3", hdrRetryAfter: "60"},
		},
		{
			name: "omit keeps Retry-After on a refusal",
			w:    headers.Writer{Omit: true},
			d:    store.Decision{Allowed: false, Limit: 5, RetryAfter: 900 * time.Second},
			want: map[string]string{hdrLimit: "", hdrRemaining: "", hdrReset: "", hdrRetryAfter: "900"},
		},
		{
			name: "omit writes nothing on an admission",
			w:    headers.Writer{Omit: true, IETF: true, Bucket: true},
			d:    store.Decision{Allowed: true, Limit: 5, Remaining: 4},
			want: map[string]string{hdrLimit: "", hdrRetryAfter: "", hdrPolicy: "", hdrBucket: ""},
		},
		{
			name: "bucket",
			w:    headers.Writer{Bucket: true, NoLegacy: true},
			d:    store.Decision{Allowed: true, Limit: 10, Remaining: 9},
			want: map[string]string{hdrLimit: "", hdrBucket: "api", hdrTier: ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeFor(t, tt.w, "api", limits, tt.d, now)
			for k, want := range tt.want {
				if got := h.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestCanonicalNames(t *testing.T) {
	for _, n := range []string{hdrLimit, hdrRemaining, hdrReset, hdrRetryAfter, hdrBucket, hdrTier, hdrRateLimit, hdrPolicy} {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("got %q, want canonical %q", n, c)
		}
	}
}

// Regression: with headers.Writer{Omit: true} (the login route), a refusal
// got a 429 whose body said "retry_after":900 but no Retry-After header.
func TestOmitStillSendsRetryAfterOn429(t *testing.T) {
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP,
		store.Limit{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Minute, Block: 15 * time.Minute},
		WithName("login"), WithCountDenied(), WithHeaders(headers.Writer{Omit: true}))
	h := lim.Handler(okHandler)
	send := func() *http.Response {
		return serveReq(h, request("POST", "/login", "198.51.100.23:7000")).Result()
	}
	if res := send(); res.StatusCode != 200 || res.Header.Get("X-Ratelimit-Remaining") != "" || res.Header.Get("Retry-After") != "" {
		t.Fatalf("admitted: got %d with headers %v, want 200 and no rate-limit headers", res.StatusCode, res.Header)
	}
	res := send()
	if res.StatusCode != 429 {
		t.Fatalf("status: got %d, want 429", res.StatusCode)
	}
	if got := res.Header.Get("Retry-After"); got != "900" {
		t.Errorf("Retry-After: got %q, want 900", got)
	}
	for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		if v := res.Header.Get(k); v != "" {
			t.Errorf("%s: got %q, want none (Omit)", k, v)
		}
	}
}

// X-RateLimit-Bucket names the limiter and X-RateLimit-Tier the tier.
func TestBucketAndTierHeaders(t *testing.T) {
	lim, err := NewTiered(mustMem(t), AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers[:2],
		WithName("read"), WithHeaders(headers.Writer{Bucket: true}), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	rec := serveReq(lim.Handler(okHandler), request("GET", "/", "192.0.2.1:1", "Authorization", "Bearer amy-token"))
	if b, tier := rec.Header().Get("X-RateLimit-Bucket"), rec.Header().Get("X-RateLimit-Tier"); b != "read" || tier != "authenticated" {
		t.Errorf("got bucket %q tier %q, want read and authenticated", b, tier)
	}
	plain := mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(5), WithName("write"), WithHeaders(headers.Writer{Bucket: true}))
	rec = serveReq(plain.Handler(okHandler), request("GET", "/", "192.0.2.1:1"))
	if b, tier := rec.Header().Get("X-RateLimit-Bucket"), rec.Header().Values("X-RateLimit-Tier"); b != "write" || tier != nil {
		t.Errorf("without tiers: got bucket %q tier %v, want write and no tier", b, tier)
	}
}

type item struct {
	name   string
	params map[string]int64
}

// parseList parses a header as an RFC 9651 List of Items with sf-string
// values and integer parameters.
func parseList(t *testing.T, h http.Header, field string) []item {
	t.Helper()
	vals := h.Values(field)
	if len(vals) == 0 {
		t.Fatalf("%s: missing", field)
	}
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		t.Fatalf("%s: %q is not a structured-field list: %v", field, vals, err)
	}
	var out []item
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%s: member %v is not an item", field, m)
		}
		name, ok := it.Value.(string)
		if !ok {
			t.Fatalf("%s: item value %v is not a string", field, it.Value)
		}
		ps := map[string]int64{}
		for _, k := range it.Params.Names() {
			v, _ := it.Params.Get(k)
			n, ok := v.(int64)
			if !ok {
				t.Fatalf("%s: parameter %s=%v is not an integer", field, k, v)
			}
			ps[k] = n
		}
		out = append(out, item{name, ps})
	}
	return out
}

func TestIETFFieldsParse(t *testing.T) {
	now := time.Unix(1767225600, 0)
	limits := []store.Limit{
		{Name: "burst", Algorithm: store.SlidingWindowLog, Rate: 10, Period: time.Minute},
		{Algorithm: store.SlidingWindowLog, Rate: 100, Period: time.Hour},
	}
	tests := []struct {
		name      string
		d         store.Decision
		want      []item
		retryWant string
	}{
		{
			name: "allowed",
			d: store.Decision{Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 50 * time.Second, Index: 0,
				PerLimit: []store.LimitState{{Remaining: 3, ResetAfter: 50 * time.Second}, {Remaining: 88, ResetAfter: 3500*time.Second + 1}}},
			want: []item{{`burst`, map[string]int64{"r": 3, "t": 50}}, {`api-1`, map[string]int64{"r": 88, "t": 3501}}},
		},
		{
			name: "refused by the hourly limit",
			d: store.Decision{Allowed: false, Limit: 100, Remaining: 0, ResetAfter: 3000 * time.Second, RetryAfter: 1200*time.Second + 5, Index: 1,
				PerLimit: []store.LimitState{{Remaining: 6, ResetAfter: 40 * time.Second}, {Remaining: 0, ResetAfter: 3000 * time.Second}}},
			want:      []item{{`burst`, map[string]int64{"r": 6, "t": 40}}, {`api-1`, map[string]int64{"r": 0, "t": 1201}}},
			retryWant: "1201",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeFor(t, headers.Writer{IETF: true}, "api", limits, tt.d, now)
			pol := parseList(t, h, "RateLimit-Policy")
			wantPol := []item{{"burst", map[string]int64{"q": 10, "w": 60}}, {"api-1", map[string]int64{"q": 100, "w": 3600}}}
			if len(pol) != len(wantPol) {
				t.Fatalf("RateLimit-Policy: got %d items, want %d", len(pol), len(wantPol))
			}
			for i := range pol {
				if pol[i].name != wantPol[i].name || pol[i].params["q"] != wantPol[i].params["q"] || pol[i].params["w"] != wantPol[i].params["w"] {
					t.Errorf("RateLimit-Policy item %d: got %+v, want %+v", i, pol[i], wantPol[i])
				}
			}
			got := parseList(t, h, "RateLimit")
			if len(got) != len(tt.want) {
				t.Fatalf("RateLimit: got %d items, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i].name != tt.want[i].name || got[i].params["r"] != tt.want[i].params["r"] || got[i].params["t"] != tt.want[i].params["t"] {
					t.Errorf("RateLimit item %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			if ra := h.Get("Retry-After"); ra != tt.retryWant {
				t.Errorf("Retry-After: got %q, want %q", ra, tt.retryWant)
			}
			if h.Get("X-RateLimit-Limit") == "" {
				t.Error("X-RateLimit-Limit missing; legacy fields stay on unless NoLegacy")
			}
		})
	}
}

func TestIETFSingleLimitAndNoLegacy(t *testing.T) {
	limits := []store.Limit{{Rate: 20, Period: 1500 * time.Millisecond}}
	h := writeFor(t, headers.Writer{IETF: true, NoLegacy: true}, "search", limits,
		store.Decision{Allowed: false, Limit: 20, RetryAfter: 300 * time.Millisecond}, time.Now())
	if got, want := h.Get("RateLimit-Policy"), `"search";q=20;w=2`; got != want {
		t.Fatalf("policy: got %s, want %s", got, want)
	}
	if got, want := h.Get("RateLimit"), `"search";r=0;t=1`; got != want {
		t.Errorf("RateLimit: got %s, want %s", got, want)
	}
	if h.Get("X-RateLimit-Limit") != "" {
		t.Error("X-RateLimit-Limit written despite NoLegacy")
	}
	if h.Get("Retry-After") != "1" {
		t.Errorf("Retry-After: got %q, want 1", h.Get("Retry-After"))
	}
}

func TestCompileRejectsUnprintableIETFNames(t *testing.T) {
	_, err := compileLimits(headers.Writer{IETF: true}, "api", []store.Limit{{Name: "é", Rate: 1, Period: time.Second}, {Rate: 2, Period: time.Minute}}, false)
	if err == nil || !strings.Contains(err.Error(), "printable ASCII") {
		t.Fatalf("got %v, want a printable-ASCII error", err)
	}
	if _, err := compileLimits(headers.Writer{}, "api", nil, false); err == nil {
		t.Fatal("got nil error for no limits, want one")
	}
}

func TestQuoteSFString(t *testing.T) {
	got, err := quoteSFString(`a"b\c`)
	if err != nil || got != `"a\"b\\c"` {
		t.Fatalf("got %s, %v; want \"a\\\"b\\\\c\"", got, err)
	}
	l, err := httpsfv.UnmarshalList([]string{got + ";r=1"})
	if err != nil {
		t.Fatal(err)
	}
	if v := l[0].(httpsfv.Item).Value; v != `a"b\c` {
		t.Fatalf("round trip: got %v, want a\"b\\c", v)
	}
}

// TestSuppressionHeader: X-RateLimit-Suppression carries the factor on
// every response of a suppressed-strategy policy, refusals included, and
// on no other policy's; Omit drops it with the other rate-limit fields.
func TestSuppressionHeader(t *testing.T) {
	now := time.Unix(1_767_225_600, 0)
	supp := []store.Limit{{Algorithm: store.Suppressed, Rate: 10, Period: time.Minute}}
	gcra := []store.Limit{{Rate: 10, Period: time.Minute}}
	tests := []struct {
		name   string
		w      headers.Writer
		limits []store.Limit
		d      store.Decision
		want   string // "" = absent
	}{
		{"below the soft limit", headers.Writer{}, supp, store.Decision{Allowed: true, Limit: 20, Remaining: 15, ResetAfter: time.Minute}, "0"},
		{"between the limits", headers.Writer{}, supp, store.Decision{Allowed: true, Limit: 20, Remaining: 5, ResetAfter: time.Minute, Suppression: 0.090909}, "0.090909"},
		{"suppressed", headers.Writer{}, supp, store.Decision{Limit: 20, Remaining: 5, ResetAfter: time.Minute, RetryAfter: time.Second, Suppression: 0.5, Suppressed: true}, "0.5"},
		{"over the hard limit", headers.Writer{IETF: true, NoLegacy: true}, supp, store.Decision{Limit: 20, ResetAfter: time.Minute, RetryAfter: time.Second, Suppression: 1}, "1"},
		{"omitted", headers.Writer{Omit: true}, supp, store.Decision{Allowed: true, Limit: 20, Remaining: 5, ResetAfter: time.Minute, Suppression: 0.25}, ""},
		{"another algorithm", headers.Writer{}, gcra, store.Decision{Allowed: true, Limit: 10, Remaining: 5, ResetAfter: time.Minute}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeFor(t, tt.w, "api", tt.limits, tt.d, now)
			got, ok := h[hdrSuppress]
			switch {
			case tt.want == "" && ok:
				t.Fatalf("got %s: %q, want no such header", hdrSuppress, got)
			case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
				t.Fatalf("got %s: %q, want %q", hdrSuppress, got, tt.want)
			}
		})
	}
}

// TestSuppressedPolicyEndToEnd runs a suppressed-strategy limiter on the
// memory store with every draw refusing: the soft limit's requests pass,
// the next one is refused as suppressed (429, the factor in its header,
// the refusal counted as such by the observer), and the hard limit holds.
func TestSuppressedPolicyEndToEnd(t *testing.T) {
	st, err := memstore.New(memstore.Options{Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recObserver{}
	l := mustNew(t, st, constKey("k"), store.Limit{Algorithm: store.Suppressed, Rate: 2, Burst: 3, Period: time.Hour}, WithObserver(obs.Observe))
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	var codes, factors []string
	for range 3 {
		rec := do(h)
		codes = append(codes, strconv.Itoa(rec.Code))
		factors = append(factors, rec.Header().Get("X-RateLimit-Suppression"))
	}
	if got, want := strings.Join(codes, " "), "200 200 429"; got != want {
		t.Fatalf("status codes: got %s, want %s", got, want)
	}
	if got, want := strings.Join(factors, " "), "0 0 0.333333"; got != want {
		t.Fatalf("suppression factors: got %s, want %s", got, want)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if e := obs.events[2]; e.Outcome != OutcomeLimited || !e.Suppressed || e.Suppression != 0.333333 {
		t.Fatalf("third event: got outcome %s, suppressed %t, suppression %v; want limited, true, 0.333333", e.Outcome, e.Suppressed, e.Suppression)
	}
}
