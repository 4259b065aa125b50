package headers

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

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

func TestWrite(t *testing.T) {
	now := time.Unix(1767225600, 250_000_000)
	tests := []struct {
		name string
		w    Writer
		d    store.Decision
		want map[string]string
	}{
		{
			name: "allowed epoch",
			d:    store.Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 18 * time.Second},
			want: map[string]string{Limit: "10", Remaining: "7", Reset: "1767225619", RetryAfter: ""},
		},
		{
			name: "allowed delta",
			w:    Writer{Reset: ResetDelta},
			d:    store.Decision{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 18*time.Second + 1},
			want: map[string]string{Limit: "10", Remaining: "7", Reset: "19", RetryAfter: ""},
		},
		{
			name: "denied uses retry for reset",
			d:    store.Decision{Allowed: false, Limit: 10, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 16*time.Second + 500*time.Millisecond},
			want: map[string]string{Limit: "10", Remaining: "0", Reset: "1767225617", RetryAfter: "17"},
		},
		{
			name: "denied sub-second retry is one second",
			w:    Writer{Reset: ResetDelta},
			d:    store.Decision{Allowed: false, Limit: 5, RetryAfter: time.Millisecond},
			want: map[string]string{Limit: "5", Remaining: "0", Reset: "1", RetryAfter: "1"},
		},
		{
			name: "omit",
			w:    Writer{Omit: true},
			d:    store.Decision{Allowed: false, Limit: 5, RetryAfter: time.Second},
			want: map[string]string{Limit: "", Remaining: "", Reset: "", RetryAfter: ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			tt.w.Write(h, tt.d, now)
			for k, want := range tt.want {
				if got := h.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestCanonicalNames(t *testing.T) {
	for _, n := range []string{Limit, Remaining, Reset, RetryAfter} {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("got %q, want canonical %q", n, c)
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	h := http.Header{}
	d := store.Decision{Allowed: true, Limit: 100, Remaining: 42, ResetAfter: 30 * time.Second}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		Writer{}.Write(h, d, now)
	}
}
