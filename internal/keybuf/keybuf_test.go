package keybuf

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"
)

type lender struct {
	context.Context
	b Buffer
}

func (l *lender) KeyBuffer() *Buffer { return &l.b }

func (l *lender) Unlent() context.Context { return l.Context }

var _ Lender = (*lender)(nil)

func TestLendOnce(t *testing.T) {
	var b Buffer
	first := b.Lend()
	if first == nil || len(first) != 0 || cap(first) != Size {
		t.Fatalf("first Lend: got len %d cap %d (nil %t), want an empty buffer of %d", len(first), cap(first), first == nil, Size)
	}
	if again := b.Lend(); again != nil {
		t.Fatalf("second Lend: got %d bytes of capacity, want nil: lent memory is never lent again", cap(again))
	}
}

func TestHolds(t *testing.T) {
	l := &lender{Context: context.Background()}
	p := append(l.b.Lend(), "policy:203.0.113.7"...)
	lent := unsafe.String(unsafe.SliceData(p), len(p))
	tests := []struct {
		name string
		ctx  context.Context
		key  string
		want bool
	}{
		{"lent key", l, lent, true},
		{"suffix of the lent key", l, lent[7:], true},
		{"copy of the lent key", l, strings.Clone(lent), false},
		{"empty key", l, "", false},
		{"context that lends nothing", context.Background(), lent, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Holds(tc.ctx, tc.key); got != tc.want {
				t.Fatalf("Holds: got %t, want %t", got, tc.want)
			}
		})
	}
}

// TestStamp: a stamped Buffer gives its instant back, as the time since
// another reading of the monotonic clock; an unstamped one, a cleared one
// and a context that lends nothing give none.
func TestStamp(t *testing.T) {
	l := &lender{Context: context.Background()}
	now := time.Now()
	if _, ok := Since(l, now); ok {
		t.Fatal("Since of an unstamped Buffer: got a duration, want none")
	}
	later := now.Add(90 * time.Minute) // keeps the monotonic reading
	l.b.Stamp(later)
	if d, ok := Since(l, now); !ok || d != 90*time.Minute {
		t.Fatalf("Since the reading it was made from: got %s, %t; want 1h30m0s, true", d, ok)
	}
	if d, ok := Since(l, later.Add(time.Second)); !ok || d != -time.Second {
		t.Fatalf("Since a second after it: got %s, %t; want -1s, true", d, ok)
	}
	l.b = Buffer{}
	if _, ok := Since(l, now); ok {
		t.Fatal("Since of a cleared Buffer: got a duration, want none")
	}
	if _, ok := Since(context.Background(), now); ok {
		t.Fatal("Since of a context that lends nothing: got a duration, want none")
	}
}

// TestUnlent: a store keeps the context a lender wraps, never the lender;
// a context that lends nothing is kept as it is.
func TestUnlent(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "request")
	l := &lender{Context: parent}
	if got := Unlent(l); got != parent {
		t.Errorf("Unlent(lender): got %v, want the context it wraps", got)
	}
	if got := Unlent(parent); got != parent {
		t.Errorf("Unlent(plain context): got %v, want the context itself", got)
	}
}
