package headers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/ratekeeper/ratekeeper/store"
)

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
	f, err := Writer{IETF: true}.Compile("api", limits)
	if err != nil {
		t.Fatal(err)
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
			h := http.Header{}
			f.Write(h, tt.d, now)
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
	f, err := Writer{IETF: true, NoLegacy: true}.Compile("search", []store.Limit{{Rate: 20, Period: 1500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.PolicyValue(), `"search";q=20;w=2`; got != want {
		t.Fatalf("policy: got %s, want %s", got, want)
	}
	h := http.Header{}
	f.Write(h, store.Decision{Allowed: false, Limit: 20, RetryAfter: 300 * time.Millisecond}, time.Now())
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

func TestCompileRejectsUnprintableNames(t *testing.T) {
	_, err := Writer{IETF: true}.Compile("api", []store.Limit{{Name: "é", Rate: 1, Period: time.Second}, {Rate: 2, Period: time.Minute}})
	if err == nil || !strings.Contains(err.Error(), "printable ASCII") {
		t.Fatalf("got %v, want a printable-ASCII error", err)
	}
	if _, err := (Writer{}).Compile("api", nil); err == nil {
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
