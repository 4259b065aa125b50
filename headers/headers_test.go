package headers

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/ratekeeper/ratekeeper/store"
)

// writeFor writes the headers a policy with options w would write for sd
// under limits, decided at now.
func writeFor(t *testing.T, w Options, policy string, limits []store.Limit, sd store.Decision, now time.Time) http.Header {
	t.Helper()
	p, err := NewPolicy(w, policy, "", limits)
	if err != nil {
		t.Fatal(err)
	}
	reset := now.Add(sd.ResetAfter)
	if !sd.Allowed {
		reset = now.Add(sd.RetryAfter)
	}
	h := http.Header{}
	p.Write(h, &sd, reset, new(Buffer), !sd.Allowed)
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
		if got := RetryAfterSeconds(tt.in); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestWriteHeaders(t *testing.T) {
	now := time.Unix(1767225600, 250_000_000)
	limits := []store.Limit{store.PerMinute(10)}
	tests := []struct {
		name string
		w    Options
		d    store.Decision
		want map[string]string
	}{
		{
			name: "allowed epoch",
			d:    store.Decision{Allowed: true, Capacity: 10, Remaining: 7, ResetAfter: 18 * time.Second},
			want: map[string]string{fieldLimit: "10", fieldRemaining: "7", fieldReset: "1767225619", fieldRetryAfter: ""},
		},
		{
			name: "allowed delta",
			w:    Options{ResetDelta: true},
			d:    store.Decision{Allowed: true, Capacity: 10, Remaining: 7, ResetAfter: 18*time.Second + 1},
			want: map[string]string{fieldLimit: "10", fieldRemaining: "7", fieldReset: "19", fieldRetryAfter: ""},
		},
		{
			name: "denied uses retry for reset",
			d:    store.Decision{Allowed: false, Capacity: 10, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 16*time.Second + 500*time.Millisecond},
			want: map[string]string{fieldLimit: "10", fieldRemaining: "0", fieldReset: "1767225617", fieldRetryAfter: "17"},
		},
		{
			name: "denied sub-second retry is one second",
			w:    Options{ResetDelta: true},
			d:    store.Decision{Allowed: false, Capacity: 5, RetryAfter: time.Millisecond},
			want: map[string]string{fieldLimit: "5", fieldRemaining: "0", fieldReset: "1", fieldRetryAfter: "1"},
		},
		{
			name: "limit of a block by a limit outside the request",
			d:    store.Decision{Allowed: false, Blocked: true, Capacity: 3, Index: -1, RetryAfter: time.Minute},
			want: map[string]string{fieldLimit: "3", fieldRetryAfter: "60"},
		},
		{
			name: "omit keeps Retry-After on a refusal",
			w:    Options{Omit: true},
			d:    store.Decision{Allowed: false, Capacity: 5, RetryAfter: 900 * time.Second},
			want: map[string]string{fieldLimit: "", fieldRemaining: "", fieldReset: "", fieldRetryAfter: "900"},
		},
		{
			name: "omit writes nothing on an admission",
			w:    Options{Omit: true, IETF: true, Bucket: true},
			d:    store.Decision{Allowed: true, Capacity: 5, Remaining: 4},
			want: map[string]string{fieldLimit: "", fieldRetryAfter: "", fieldPolicy: "", fieldBucket: ""},
		},
		{
			name: "bucket",
			w:    Options{Bucket: true, NoLegacy: true},
			d:    store.Decision{Allowed: true, Capacity: 10, Remaining: 9},
			want: map[string]string{fieldLimit: "", fieldBucket: "api", fieldTier: ""},
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
	for _, n := range []string{fieldLimit, fieldRemaining, fieldReset, fieldRetryAfter, fieldBucket, fieldTier, fieldRateLimit, fieldPolicy} {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("got %q, want canonical %q", n, c)
		}
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
			// t is the time until more quota (NextAfter), not until the
			// limit is full (ResetAfter).
			name: "allowed",
			d: store.Decision{Allowed: true, Capacity: 10, Remaining: 3, ResetAfter: 50 * time.Second, NextAfter: 12 * time.Second, Index: 0,
				PerLimit: []store.LimitState{{Remaining: 3, ResetAfter: 50 * time.Second, NextAfter: 12 * time.Second},
					{Remaining: 88, ResetAfter: 3500*time.Second + 1, NextAfter: 20*time.Second + 1}}},
			want: []item{{`burst`, map[string]int64{"r": 3, "t": 12}}, {`api-1`, map[string]int64{"r": 88, "t": 21}}},
		},
		{
			// A full limit has no more quota to come: no t, as the
			// draft's example of "no time window reset".
			name: "a full limit",
			d: store.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: 6 * time.Second, NextAfter: 6 * time.Second, Index: 0,
				PerLimit: []store.LimitState{{Remaining: 9, ResetAfter: 6 * time.Second, NextAfter: 6 * time.Second}, {Remaining: 100}}},
			want: []item{{`burst`, map[string]int64{"r": 9, "t": 6}}, {`api-1`, map[string]int64{"r": 100}}},
		},
		{
			// The deciding limit's t is when one unit more comes, earlier
			// than Retry-After for a request of several units.
			name: "refused by the hourly limit",
			d: store.Decision{Allowed: false, Capacity: 100, Remaining: 0, ResetAfter: 3000 * time.Second, NextAfter: 600 * time.Second, RetryAfter: 1200*time.Second + 5, Index: 1,
				PerLimit: []store.LimitState{{Remaining: 6, ResetAfter: 40 * time.Second, NextAfter: 7 * time.Second}, {Remaining: 0, ResetAfter: 3000 * time.Second, NextAfter: 900 * time.Second}}},
			want:      []item{{`burst`, map[string]int64{"r": 6, "t": 7}}, {`api-1`, map[string]int64{"r": 0, "t": 600}}},
			retryWant: "1201",
		},
		{
			// Refused by the short limit: the hourly limit's next unit is
			// later than Retry-After, so its item goes without t.
			name: "refused by the short limit",
			d: store.Decision{Allowed: false, Capacity: 10, Remaining: 0, ResetAfter: 60 * time.Second, NextAfter: 6 * time.Second, RetryAfter: 6 * time.Second, Index: 0,
				PerLimit: []store.LimitState{{Remaining: 0, ResetAfter: 60 * time.Second, NextAfter: 6 * time.Second}, {Remaining: 40, ResetAfter: 3000 * time.Second, NextAfter: 1000 * time.Second}}},
			want:      []item{{`burst`, map[string]int64{"r": 0, "t": 6}}, {`api-1`, map[string]int64{"r": 40}}},
			retryWant: "6",
		},
		{
			name: "blocked",
			d: store.Decision{Allowed: false, Blocked: true, Capacity: 10, ResetAfter: 90 * time.Second, NextAfter: 90 * time.Second, RetryAfter: 90 * time.Second, Index: 0,
				PerLimit: []store.LimitState{{Remaining: 2, ResetAfter: 30 * time.Second, NextAfter: 3 * time.Second}, {Remaining: 40, ResetAfter: 3000 * time.Second, NextAfter: 50 * time.Second}}},
			want:      []item{{`burst`, map[string]int64{"r": 0, "t": 90}}, {`api-1`, map[string]int64{"r": 0, "t": 90}}},
			retryWant: "90",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeFor(t, Options{IETF: true}, "api", limits, tt.d, now)
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
				_, gotT := got[i].params["t"]
				_, wantT := tt.want[i].params["t"]
				if got[i].name != tt.want[i].name || got[i].params["r"] != tt.want[i].params["r"] || got[i].params["t"] != tt.want[i].params["t"] || gotT != wantT {
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
	h := writeFor(t, Options{IETF: true, NoLegacy: true}, "search", limits,
		store.Decision{Allowed: false, Capacity: 20, NextAfter: 300 * time.Millisecond, RetryAfter: 300 * time.Millisecond}, time.Now())
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

// Under a scale override the decision's capacity is not its limit's:
// RateLimit-Policy gives the deciding limit's item with the decision's
// capacity, and not the other limits' configured quotas, which the
// override changed too.
func TestIETFPolicyUnderScaleOverride(t *testing.T) {
	limits := []store.Limit{{Name: "m", Rate: 10, Period: time.Minute}, {Name: "h", Rate: 100, Period: time.Hour}}
	tests := []struct {
		name string
		d    store.Decision
		want string
	}{
		{"no override", store.Decision{Allowed: true, Capacity: 10, Remaining: 9, ResetAfter: 6 * time.Second}, `"m";q=10;w=60, "h";q=100;w=3600`},
		{"raised", store.Decision{Allowed: true, Capacity: 30, Remaining: 29, ResetAfter: 2 * time.Second, Override: store.OverrideScale}, `"m";q=30;w=60`},
		{"cut, the second limit deciding", store.Decision{Allowed: true, Index: 1, Capacity: 50, Remaining: 1, ResetAfter: time.Hour, Override: store.OverrideScale}, `"h";q=50;w=3600`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeFor(t, Options{IETF: true}, "api", limits, tt.d, time.Now())
			if got := h.Get("RateLimit-Policy"); got != tt.want {
				t.Errorf("RateLimit-Policy: got %s, want %s", got, tt.want)
			}
			if got, want := h.Get("X-RateLimit-Limit"), strconv.FormatInt(tt.d.Capacity, 10); got != want {
				t.Errorf("X-RateLimit-Limit: got %s, want %s", got, want)
			}
		})
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

// TestSuppressionHeader: with Options.Suppression, X-RateLimit-Suppression
// carries the factor on every response, refusals included; without it no
// response has it; Omit drops it with the other rate-limit fields.
func TestSuppressionHeader(t *testing.T) {
	now := time.Unix(1_767_225_600, 0)
	supp := []store.Limit{{Algorithm: store.SlidingWindowCounter, Rate: 20, Period: time.Minute}}
	gcra := []store.Limit{{Rate: 10, Period: time.Minute}}
	on := Options{Suppression: true}
	tests := []struct {
		name   string
		w      Options
		limits []store.Limit
		d      store.Decision
		want   string // "" = absent
	}{
		{"below the soft limit", on, supp, store.Decision{Allowed: true, Capacity: 20, Remaining: 15, ResetAfter: time.Minute}, "0"},
		{"between the limits", on, supp, store.Decision{Allowed: true, Capacity: 20, Remaining: 5, ResetAfter: time.Minute, Suppression: 0.090909}, "0.090909"},
		{"suppressed", on, supp, store.Decision{Capacity: 20, Remaining: 5, ResetAfter: time.Minute, RetryAfter: time.Second, Suppression: 0.5, Suppressed: true}, "0.5"},
		{"over the hard limit", Options{IETF: true, NoLegacy: true, Suppression: true}, supp, store.Decision{Capacity: 20, ResetAfter: time.Minute, RetryAfter: time.Second, Suppression: 1}, "1"},
		{"omitted", Options{Omit: true, Suppression: true}, supp, store.Decision{Allowed: true, Capacity: 20, Remaining: 5, ResetAfter: time.Minute, Suppression: 0.25}, ""},
		{"not asked for", Options{}, supp, store.Decision{Allowed: true, Capacity: 20, Remaining: 5, ResetAfter: time.Minute, Suppression: 0.25}, ""},
		{"another algorithm", Options{}, gcra, store.Decision{Allowed: true, Capacity: 10, Remaining: 5, ResetAfter: time.Minute}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := writeFor(t, tt.w, "api", tt.limits, tt.d, now)
			got, ok := h[fieldSuppression]
			switch {
			case tt.want == "" && ok:
				t.Fatalf("got %s: %q, want no such header", fieldSuppression, got)
			case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
				t.Fatalf("got %s: %q, want %q", fieldSuppression, got, tt.want)
			}
		})
	}
}

// A nil Policy stands for a decision without limits: it writes
// Retry-After on a refusal and nothing else.
func TestNilPolicyWritesRetryAfterOnly(t *testing.T) {
	var p *Policy
	h := http.Header{}
	p.Write(h, &store.Decision{Capacity: 5, RetryAfter: 1500 * time.Millisecond}, time.Now(), new(Buffer), true)
	if len(h) != 1 || h.Get("Retry-After") != "2" {
		t.Fatalf("got %v, want Retry-After: 2 alone", h)
	}
	p.Write(h, &store.Decision{Allowed: true}, time.Now(), new(Buffer), false)
	if len(h) != 1 {
		t.Fatalf("admitted: got %v, want nothing more", h)
	}
}

// Item names the RateLimit-Policy item of each limit, with or without the
// IETF fields, and "" outside the policy's limits.
func TestPolicyItem(t *testing.T) {
	limits := []store.Limit{{Name: "burst", Rate: 10, Period: time.Minute}, {Rate: 100, Period: time.Hour}}
	p, err := NewPolicy(Options{}, "api", "gold", limits)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "burst", "api/gold-1", ""} {
		if got := p.Item(i - 1); got != want {
			t.Errorf("Item(%d): got %q, want %q", i-1, got, want)
		}
	}
	one, err := NewPolicy(Options{}, "api", "gold", limits[:1])
	if err != nil {
		t.Fatal(err)
	}
	if got := one.Item(0); got != "api/gold" {
		t.Errorf("one limit: got %q, want the policy label api/gold", got)
	}
}

// WriteRetryAfter rounds up to whole seconds, at least 1.
func TestWriteRetryAfter(t *testing.T) {
	h := http.Header{}
	WriteRetryAfter(h, 0)
	if got := h.Get("Retry-After"); got != "1" {
		t.Fatalf("got %q, want 1", got)
	}
	WriteRetryAfter(h, 2*time.Second+1)
	if got := h.Get("Retry-After"); got != "3" {
		t.Fatalf("got %q, want 3", got)
	}
}

// TestSharedValues checks the values shared between responses: every
// small number, and the X-RateLimit-Reset seconds a policy keeps, read as
// they would be formatted, in any order of seconds (a slot holding another
// second, a second met again), and the fields written without a Buffer.
func TestSharedValues(t *testing.T) {
	var b Buffer
	for v := range int64(smallNums) + 3 {
		got := b.num(v)
		if len(got) != 1 || got[0] != strconv.FormatInt(v, 10) {
			t.Fatalf("num(%d) = %q", v, got)
		}
	}
	if b.nv != 3 {
		t.Errorf("the Buffer holds %d values, want the 3 numbers above the shared ones", b.nv)
	}
	// Past its own room, the Buffer carves values from chunks: many
	// values, none written over.
	var kept [][]string
	for v := range int64(100) {
		kept = append(kept, b.num(1<<40+v))
	}
	for v, got := range kept {
		if want := strconv.FormatInt(1<<40+int64(v), 10); len(got) != 1 || got[0] != want {
			t.Fatalf("value %d after 100 more: got %q, want %s", v, got, want)
		}
	}
	p, err := NewPolicy(Options{}, "api", "", []store.Limit{store.PerMinute(10)})
	if err != nil {
		t.Fatal(err)
	}
	base := int64(1767225600)
	seconds := []int64{base, base, base + 8, base, base + 3, base + 8, base + 16, base + 8, base + 1, base + 1}
	for i, sec := range seconds {
		got := p.resetValue(sec)
		if len(got) != 1 || got[0] != strconv.FormatInt(sec, 10) {
			t.Fatalf("reset value %d (second %d): got %q", i, sec, got)
		}
	}
	// An admission's headers, without a Buffer: the same fields as with one.
	sd := store.Decision{Allowed: true, Capacity: 10, Remaining: 1 << 40, ResetAfter: 18 * time.Second}
	h := http.Header{}
	p.Write(h, &sd, time.Unix(base, 1), nil, false)
	if h.Get(fieldRemaining) != "1099511627776" || h.Get(fieldReset) != strconv.FormatInt(base+1, 10) || h.Get(fieldLimit) != "10" {
		t.Errorf("without a Buffer: got %v", h)
	}
	// A shared value is never changed by a later write: appending to it
	// (Header.Add) copies it.
	shared := http.Header{}
	p.Write(shared, &store.Decision{Allowed: true, Capacity: 10, Remaining: 7}, time.Unix(base, 0), nil, false)
	shared.Add(fieldRemaining, "x")
	h2 := http.Header{}
	p.Write(h2, &store.Decision{Allowed: true, Capacity: 10, Remaining: 7}, time.Unix(base, 0), nil, false)
	if got := h2.Values(fieldRemaining); len(got) != 1 || got[0] != "7" {
		t.Errorf("a shared value after an Add elsewhere: got %q", got)
	}
}

// TestNearCapacityValues checks X-RateLimit-Remaining near the capacity of
// limits too large for the small values: each count written as it would be
// formatted, on both sides of the shared values' bounds, with the values
// near the capacity taken from the policy (the Buffer untouched, no
// allocation); and a decision whose capacity is not the policy's (an
// override) written from the Buffer.
func TestNearCapacityValues(t *testing.T) {
	for _, c := range []int64{smallNums - 1, smallNums, smallNums + 10, 5000, 1 << 30} {
		p, err := NewPolicy(Options{}, "api", "", []store.Limit{{Rate: c, Period: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		if (p.near[0] == nil) != (c < smallNums) {
			t.Errorf("capacity %d: shared values near it made: %v", c, p.near[0] != nil)
		}
		reset := time.Unix(1767225600, 0)
		for _, rem := range []int64{c, c - 1, c - 2, c - nearNums + 1, c - nearNums, c - nearNums - 1, smallNums + 1, smallNums, smallNums - 1, 7, 0} {
			if rem < 0 || rem > c {
				continue
			}
			var b Buffer
			h := http.Header{}
			d := store.Decision{Allowed: true, Capacity: c, Remaining: rem, ResetAfter: time.Second}
			p.Write(h, &d, reset, &b, false)
			if got, want := h.Get(fieldRemaining), strconv.FormatInt(rem, 10); got != want {
				t.Fatalf("capacity %d, remaining %d: X-RateLimit-Remaining %q, want %q", c, rem, got, want)
			}
			if got, want := h.Get(fieldLimit), strconv.FormatInt(c, 10); got != want {
				t.Fatalf("capacity %d: X-RateLimit-Limit %q, want %q", c, got, want)
			}
			shared := rem < smallNums || c-rem < nearNums
			if held := b.nv > 0; held == shared {
				t.Errorf("capacity %d, remaining %d: the value held in the Buffer: %v, want %v", c, rem, held, !shared)
			}
			// An override's capacity: the count is the decision's, written
			// from the Buffer past the small values.
			d.Capacity++
			h = http.Header{}
			p.Write(h, &d, reset, &b, false)
			if got, want := h.Get(fieldRemaining), strconv.FormatInt(rem, 10); got != want {
				t.Fatalf("capacity %d+1, remaining %d: X-RateLimit-Remaining %q, want %q", c, rem, got, want)
			}
			if got, want := h.Get(fieldLimit), strconv.FormatInt(c+1, 10); got != want {
				t.Fatalf("capacity %d+1: X-RateLimit-Limit %q, want %q", c, got, want)
			}
		}
		if c < smallNums {
			continue
		}
		// Responses near the capacity allocate nothing, with the Buffer's
		// own room used up.
		var b Buffer
		for v := range int64(len(b.vals)) {
			b.num(1<<40 + v)
		}
		h := http.Header{}
		d := store.Decision{Allowed: true, Capacity: c, Remaining: c - 1, ResetAfter: time.Second}
		p.Write(h, &d, reset, &b, false)
		if n := testing.AllocsPerRun(100, func() { p.Write(h, &d, reset, &b, false) }); n != 0 {
			t.Errorf("capacity %d: %.1f allocations per response near the capacity, want 0", c, n)
		}
	}
}

// TestNearValuesShared checks that the values near a capacity are made
// once for every policy with a limit of that capacity, and that past its
// bound a nearValues gives none to a new capacity while it still gives
// those it keeps.
func TestNearValuesShared(t *testing.T) {
	limits := []store.Limit{{Rate: 100000, Period: time.Minute}}
	p1, err := NewPolicy(Options{}, "api", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := NewPolicy(Options{}, "search", "gold", limits)
	if err != nil {
		t.Fatal(err)
	}
	a, b := p1.near[0](), p2.near[0]()
	if len(a) != nearNums || &a[0] != &b[0] {
		t.Fatalf("two policies of capacity 100000: %d values, shared: %v", len(a), &a[0] == &b[0])
	}
	v := nearValues{max: 2}
	for _, c := range []int64{5000, 6000} {
		if v.of(c) == nil {
			t.Fatalf("capacity %d: no values below the bound", c)
		}
	}
	if v.of(7000) != nil {
		t.Errorf("capacity 7000: values past the bound of 2 capacities")
	}
	if f := v.of(5000); f == nil || f()[0] != "5000" || f()[511] != "4489" {
		t.Errorf("capacity 5000 again: its values are not kept")
	}
	if v.of(smallNums-1) != nil || v.n.Load() != 2 {
		t.Errorf("a capacity below the small values got near ones, or counted (%d kept)", v.n.Load())
	}
}
