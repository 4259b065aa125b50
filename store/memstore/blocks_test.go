package memstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
)

// TestBlocksPagesOnce: pages hold at most count blocks, and every blocked
// key is listed exactly once across the shards, also when a key is
// blocked while the listing runs.
func TestBlocksPagesOnce(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := newMem(Options{Shards: 4, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lim := store.Limit{Name: "minute", Rate: 1, Period: time.Minute, Block: time.Minute}
	block := func(key string) {
		t.Helper()
		for range 2 {
			if _, err := s.Take(ctx, store.Request{Key: key, Limits: []store.Limit{lim}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 23 {
		block("login:" + strconv.Itoa(i))
	}
	seen := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("the listing does not end")
		}
		blocks, next, err := s.Blocks(ctx, "login:", cursor, 4)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(blocks) > 4 {
			t.Errorf("page %d: got %d blocks, want at most 4", pages, len(blocks))
		}
		for _, b := range blocks {
			seen[b.Key]++
		}
		if pages == 0 {
			block("login:") // listed or not, depending on its shard
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	for i := range 23 {
		if k := "login:" + strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("%q listed %d times, want once", k, seen[k])
		}
	}
	if seen["login:"] > 1 {
		t.Errorf("the key blocked during the listing was listed %d times, want at most once", seen["login:"])
	}
}
