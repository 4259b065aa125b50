package keybuf

import (
	"context"
	"strings"
	"testing"
	"unsafe"
)

type lender struct {
	context.Context
	b Buffer
}

func (l *lender) KeyBuffer() *Buffer { return &l.b }

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
