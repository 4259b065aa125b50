package memstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

var _ store.BlockLister = (*memStore)(nil)

// Blocks implements [store.BlockLister]: it lists the keys starting with
// keyPrefix that are blocked now, with the limit that started each block
// and its remaining time (whole milliseconds, as the Redis store reports
// them), a page of at most count blocks at a time.
//
// It walks the shards in turn and each shard's blocked keys in byte
// order; the cursor names the shard and the last key listed. A key
// blocked while a listing runs is listed when it sorts after the cursor
// and missed otherwise; no key is listed twice. A page reads every record
// of the shards it covers, each shard under its lock (held for that read
// alone, as for a decision that makes room), so a listing costs time in
// proportion to the keys stored: an operator's call, not a request's.
// ctx is not consulted.
//
// It returns an error wrapping [store.ErrInvalidRequest] for a count
// below 1 or a cursor it did not issue.
func (s *memStore) Blocks(_ context.Context, keyPrefix, cursor string, count int) ([]store.Block, string, error) {
	if count < 1 {
		return nil, "", fmt.Errorf("%w: block listing: count must be positive, got %d", store.ErrInvalidRequest, count)
	}
	pos, after, err := s.parseBlockCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	var out []store.Block
	for ; pos < len(s.shards); pos, after = pos+1, "" {
		if len(out) == count {
			return out, blockCursor(pos, ""), nil
		}
		blocks := s.shards[pos].blocks(s.now(), keyPrefix, after)
		if room := count - len(out); len(blocks) > room {
			out = append(out, blocks[:room]...)
			return out, blockCursor(pos, out[len(out)-1].Key), nil
		}
		out = append(out, blocks...)
	}
	return out, "", nil
}

// blocks returns the keys of sh that start with prefix, sort after after
// (every key when after is empty) and are blocked at now, in byte order.
func (sh *shard) blocks(now int64, prefix, after string) []store.Block {
	sh.lock()
	now = sh.clock(now)
	nowMS := floorMS(now)
	var out []store.Block
	sh.index.each(func(r *record) {
		key := r.key
		if !r.ks.blocked(now) || !strings.HasPrefix(key, prefix) || (after != "" && key <= after) {
			return
		}
		out = append(out, store.Block{Key: key, Scope: r.ks.scope, Remaining: time.Duration(r.ks.blockEnd-nowMS) * time.Millisecond})
	})
	sh.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Block) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// blockCursor returns the cursor of a listing that goes on after key in
// shard pos (from its start when key is empty): "<pos>.<base64url of
// key>".
func blockCursor(pos int, key string) string {
	return strconv.Itoa(pos) + "." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// parseBlockCursor undoes blockCursor; "" starts at the first shard.
func (s *memStore) parseBlockCursor(cursor string) (pos int, after string, err error) {
	if cursor == "" {
		return 0, "", nil
	}
	p, k, ok := strings.Cut(cursor, ".")
	pos, perr := strconv.Atoi(p)
	key, kerr := base64.RawURLEncoding.DecodeString(k)
	if !ok || perr != nil || kerr != nil || pos < 0 || pos >= len(s.shards) {
		return 0, "", fmt.Errorf("%w: block listing: invalid cursor %q", store.ErrInvalidRequest, cursor)
	}
	return pos, string(key), nil
}
