package storetest

import (
	"errors"
	"strconv"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// testBlockListing: a store that lists its blocks ([store.BlockLister])
// lists, page by page, every key under a prefix that is blocked, with the
// limit that started its block and its remaining time, and no key that is
// not blocked or lies outside the prefix (one that shares its first
// bytes included); an invalid count or cursor is refused. With an exact
// clock (unless the listing runs on real time), the remaining time is
// exact and an ended block is no longer listed.
func testBlockListing(e *env) {
	bl, ok := e.h.Store.(store.BlockLister)
	if !ok {
		e.Skipf("%T does not implement store.BlockLister", e.h.Store)
	}
	lim := blocking("listed", store.GCRA, 1, time.Minute, time.Minute, 0)
	block := func(key string, times int) {
		r := store.Request{Key: key, Limits: []store.Limit{lim}}
		for range times {
			e.take(r)
		}
	}
	prefix := e.prefix + "list:"
	want := map[string]bool{prefix + `{x}*?[%]\:é`: true}
	for i := range 12 {
		want[prefix+strconv.Itoa(i)] = true
	}
	for k := range want {
		block(k, 2)
	}
	block(prefix+"free", 1)     // admitted, not blocked
	block(e.prefix+"lisx:1", 2) // blocked, outside the prefix

	exact := e.h.Exact && !e.h.RealTimeListing
	got := e.listBlocks(bl, prefix, 5)
	for k := range want {
		if _, ok := got[k]; !ok {
			e.Errorf("Blocks(%q): %q not listed", prefix, k)
		}
	}
	for k, b := range got {
		if !want[k] {
			e.Errorf("Blocks(%q): listed %q, which is not blocked under the prefix", prefix, k)
			continue
		}
		if b.Scope != "listed" || b.Remaining <= 0 || !e.h.RealTimeListing && b.Remaining > time.Minute || exact && b.Remaining != time.Minute {
			e.Errorf("Blocks(%q): got %+v, want Scope listed and Remaining %s", prefix, b, time.Minute)
		}
	}
	for _, bad := range []struct {
		cursor string
		count  int
	}{{"", 0}, {"bogus", 5}} {
		if _, _, err := bl.Blocks(e.ctx, prefix, bad.cursor, bad.count); !errors.Is(err, store.ErrInvalidRequest) {
			e.Errorf("Blocks(cursor %q, count %d): got %v, want ErrInvalidRequest", bad.cursor, bad.count, err)
		}
	}
	if exact {
		e.advance(time.Minute)
		if got := e.listBlocks(bl, prefix, 5); len(got) != 0 {
			e.Errorf("Blocks(%q) once the blocks ended: got %v, want none", prefix, got)
		}
	}
}

// listBlocks lists the blocks under prefix, count at a time, to the end.
func (e *env) listBlocks(bl store.BlockLister, prefix string, count int) map[string]store.Block {
	e.Helper()
	got := map[string]store.Block{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			e.Fatalf("Blocks(%q): the listing does not end", prefix)
		}
		blocks, next, err := bl.Blocks(e.ctx, prefix, cursor, count)
		if err != nil {
			e.Fatalf("Blocks(%q, cursor %q): got error %v, want nil", prefix, cursor, err)
		}
		for _, b := range blocks {
			got[b.Key] = b
		}
		if cursor = next; cursor == "" {
			return got
		}
	}
}
