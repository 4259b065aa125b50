package middleware

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestRefusalBodyMemo: a state that keeps its last refusal body writes
// exactly what a fresh rendering would, whichever input of the body
// changed from one refusal to the next, and for two policies taking turns
// with one state.
func TestRefusalBodyMemo(t *testing.T) {
	limits := []store.Limit{store.PerMinute(10), store.PerHour(100)}
	fields, err := headers.NewPolicy(headers.Options{IETF: true}, "api", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	plain := &policy{name: "api"}
	problem := &policy{name: "api", problem: true}
	base := limiter.Decision{Policy: "api"}
	base.Capacity, base.RetryAfter, base.Index, base.LimitID = 10, 17*time.Second, 0, "minute"
	base.Reset, base.Headers = time.Unix(1767225600, 0), fields
	change := map[string]func(d *limiter.Decision){
		"same":           func(*limiter.Decision) {},
		"retry after":    func(d *limiter.Decision) { d.RetryAfter = 18 * time.Second },
		"capacity":       func(d *limiter.Decision) { d.Capacity = 100 },
		"remaining":      func(d *limiter.Decision) { d.Remaining = 3 },
		"reset":          func(d *limiter.Decision) { d.Reset = d.Reset.Add(time.Second) },
		"blocked":        func(d *limiter.Decision) { d.Blocked = true },
		"limit id":       func(d *limiter.Decision) { d.Blocked, d.LimitID = true, "hour" },
		"policy":         func(d *limiter.Decision) { d.Policy = "api/gold" },
		"deciding limit": func(d *limiter.Decision) { d.Index = 1 },
	}
	var rb refusalBody
	for _, h := range []*policy{plain, problem, plain} {
		for name, f := range change {
			d := base
			f(&d)
			// Base first, then the changed decision, on one state.
			for i, dec := range []limiter.Decision{base, d, d} {
				want := h.limitedBody(nil, &dec)
				rec := httptest.NewRecorder()
				h.writeLimitedFrom(rec, &dec, &rb)
				if !bytes.Equal(rec.Body.Bytes(), want) {
					t.Fatalf("problem=%t, %s, refusal %d: wrote %s, want %s", h.problem, name, i, rec.Body.Bytes(), want)
				}
				if rec.Code != 429 || rec.Header().Get("Content-Type") != h.contentType() {
					t.Fatalf("problem=%t, %s: got status %d and %q", h.problem, name, rec.Code, rec.Header().Get("Content-Type"))
				}
			}
		}
	}
	// A body too large to keep is written, then dropped.
	d := base
	d.Blocked, d.LimitID = true, fmt.Sprintf("%05000d", 1)
	rec := httptest.NewRecorder()
	plain.writeLimitedFrom(rec, &d, &rb)
	if want := plain.limitedBody(nil, &d); !bytes.Equal(rec.Body.Bytes(), want) || rb.body != nil {
		t.Fatalf("a %d-byte body: wrote %d bytes, kept %d; want it written and not kept", len(want), rec.Body.Len(), cap(rb.body))
	}
}
