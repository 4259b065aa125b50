package admin

import (
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// refusal is a refused decision of policy (with tier, if any).
func refusal(policy, tier string) limiter.Decision {
	p := policy
	if tier != "" {
		p += "/" + tier
	}
	return limiter.Decision{Decision: store.Decision{Capacity: 10}, Policy: p, Tier: tier}
}

// newTestTop returns a Top whose clock is *now.
func newTestTop(t *testing.T, k, minutes int, now *time.Time) *Top {
	t.Helper()
	top := &Top{Clients: k, Minutes: minutes}
	if err := top.check(); err != nil {
		t.Fatal(err)
	}
	top.now = func() time.Time { return *now }
	return top
}

func TestTopValidates(t *testing.T) {
	for _, c := range []struct{ k, minutes int }{{-1, 5}, {10001, 5}, {10, -1}, {10, 61}} {
		if err := (&Top{Clients: c.k, Minutes: c.minutes}).check(); err == nil {
			t.Errorf("Top{Clients: %d, Minutes: %d}: got nil error", c.k, c.minutes)
		}
	}
	var zero Top
	if err := zero.check(); err != nil {
		t.Fatalf("the zero Top: got %v, want nil", err)
	}
	if k, minutes := zero.limits(); k != 100 || minutes != 15 {
		t.Errorf("the zero Top keeps %d clients over %d minutes, want 100 over 15", k, minutes)
	}
}

func TestTopRecordsRefusalsOnly(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	top := newTestTop(t, 10, 5, &now)
	top.Record(limiter.Decision{Decision: store.Decision{Allowed: true, Capacity: 10}, Policy: "api"}, "allowed")
	top.Record(limiter.Decision{Policy: "api/suspended", Tier: "suspended"}, "suspended") // no limit applied
	top.Record(refusal("api", ""), "")                                                    // no identity
	top.Record(refusal("api", "free"), "dora")
	got := top.top("api", 5*time.Minute, 10)
	if len(got) != 1 || got[0] != (topEntry{Tier: "free", Identity: "dora", Count: 1}) {
		t.Errorf("got %+v, want only dora of tier free", got)
	}
	if got := top.top("other", 5*time.Minute, 10); len(got) != 0 {
		t.Errorf("other policy: got %+v, want nothing", got)
	}
}

func TestTopBoundedAndKeepsHeavyHitters(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const k = 8
	top := newTestTop(t, k, 1, &now)
	// One heavy client among 1000 distinct light ones.
	for i := range 1000 {
		top.Record(refusal("api", ""), "light-"+strconv.Itoa(i))
		if i%4 == 0 {
			top.Record(refusal("api", ""), "heavy")
		}
	}
	for _, m := range top.policies["api"] {
		if len(m.entries) > k {
			t.Fatalf("got %d entries in a minute, want at most %d", len(m.entries), k)
		}
	}
	got := top.top("api", time.Minute, 1)
	if len(got) != 1 || got[0].Identity != "heavy" {
		t.Fatalf("got %+v, want heavy first", got)
	}
	if h := got[0]; h.Count < 250 || h.Count-h.Error > 250 {
		t.Errorf("got count %d error %d, want count >= 250 >= count-error", h.Count, h.Error)
	}
}

func TestTopWindowSlides(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).Truncate(time.Minute)
	top := newTestTop(t, 10, 3, &now)
	for minute, id := range []string{"m0", "m1", "m2", "m3"} {
		now = now.Add(time.Duration(min(minute, 1)) * time.Minute)
		top.Record(refusal("api", ""), id)
		top.Record(refusal("api", ""), "steady")
	}
	tests := []struct {
		span time.Duration
		want []topEntry
	}{
		{time.Minute, []topEntry{{Identity: "m3", Count: 1}, {Identity: "steady", Count: 1}}},
		{2 * time.Minute, []topEntry{{Identity: "steady", Count: 2}, {Identity: "m2", Count: 1}, {Identity: "m3", Count: 1}}},
		{time.Hour, []topEntry{{Identity: "steady", Count: 3}, {Identity: "m1", Count: 1}, {Identity: "m2", Count: 1}, {Identity: "m3", Count: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.span.String(), func(t *testing.T) {
			got := top.top("api", tt.span, 10)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("got %+v, want %+v", got, tt.want)
					break
				}
			}
		})
	}
	// Long after, nothing is left.
	now = now.Add(10 * time.Minute)
	if got := top.top("api", time.Hour, 10); len(got) != 0 {
		t.Errorf("10 minutes later: got %+v, want nothing", got)
	}
}
