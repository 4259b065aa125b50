package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestDecodePartial checks the grant a partial-grant script appends to
// its full reply: 1 to the cost wanted when admitted, 0 when refused;
// anything else, or no grant at all, is a bad reply.
func TestDecodePartial(t *testing.T) {
	req := &store.Request{Key: "k", Limits: []store.Limit{{Rate: 5, Period: time.Hour}}, Cost: 4, Partial: true}
	admitted := func(granted any) []any {
		return []any{int64(1), int64(0), int64(1), int64(2880000000), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0),
			int64(1), int64(2880000000), "", "", granted}
	}
	refused := func(granted any) []any {
		return []any{int64(0), int64(0), int64(0), int64(3600000000), int64(720000000), int64(0), int64(0), int64(0), int64(0), int64(0),
			int64(0), int64(3600000000), "", "", granted}
	}
	for _, tc := range []struct {
		name    string
		reply   []any
		granted int64 // -1: a bad reply
	}{
		{"admitted, 4 of 4", admitted(int64(4)), 4},
		{"admitted, 1 of 4", admitted(int64(1)), 1},
		{"refused", refused(int64(0)), 0},
		{"admitted, none granted", admitted(int64(0)), -1},
		{"admitted, more than wanted", admitted(int64(5)), -1},
		{"refused, granted", refused(int64(1)), -1},
		{"grant not an integer", admitted("4"), -1},
		{"no grant", admitted(int64(4))[:14], -1},
	} {
		d, err := decodePartial(tc.reply, req, 4)
		switch {
		case tc.granted < 0 && !errors.Is(err, errBadReply):
			t.Errorf("%s: got %+v, %v, want an error wrapping errBadReply", tc.name, d, err)
		case tc.granted >= 0 && (err != nil || d.Granted != tc.granted):
			t.Errorf("%s: got Granted %d, error %v, want %d, nil", tc.name, d.Granted, err, tc.granted)
		}
	}
}
