package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

var _ store.BlockLister = (*redisStore)(nil)

// blockScansPerPage bounds the SCAN calls of one page of Blocks,
// so that a page costs a bounded amount of work however sparse the blocks
// are among the keys.
const blockScansPerPage = 16

// Blocks implements [store.BlockLister]: it lists the blocked keys that
// start with keyPrefix, with the limit that started each block and its
// remaining time (the block key's PTTL).
//
// It scans for the store's block keys ("<prefix>:{<encoded key>}:block",
// see "Keys" in the package documentation) with SCAN MATCH and COUNT
// count, stopping once it has count keys or after 16 SCAN calls (SCAN's
// COUNT is a hint: a page may hold a few more than count), then reads
// each block's scope and remaining time in one pipeline. It never uses
// KEYS. As with SCAN, a key may be listed twice, and one blocked or
// unblocked while the listing runs may be missed.
//
// On a Redis Cluster every master is scanned, one after the other in the
// order of their addresses: the cursor names the master and the position
// in its keyspace. Replicas hold copies and are not scanned. A cluster
// whose masters change while a listing runs (a failover, resharding) may
// see blocks missed or listed twice.
//
// Keys whose encoded form is longer than [maxEncodedLen] are stored
// hashed, cannot be matched by their prefix, and are not listed.
//
// It returns an error wrapping [store.ErrInvalidRequest] for a count
// below 1 or a cursor it did not issue (one naming a master the cluster
// no longer has among them), and a *[store.BackendError] when Redis
// fails. Each of its calls to Redis (a SCAN, the pipeline of reads, and on
// a cluster the lookup of its masters) answers within the store's
// [Options.Timeout] or ctx's earlier deadline, as a decision does: a
// stalled Redis fails the listing with a timeout after one budget, not
// after the client's socket timeouts. ctx bounds the whole listing.
func (s *redisStore) Blocks(ctx context.Context, keyPrefix, cursor string, count int) ([]store.Block, string, error) {
	if count < 1 {
		return nil, "", fmt.Errorf("%w: block listing: count must be positive, got %d", store.ErrInvalidRequest, count)
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return nil, "", err
	}
	node, pos, err := parseScanCursor(cursor, len(nodes))
	if err != nil {
		return nil, "", err
	}
	pattern := globEscape(s.prefix) + ":{" + encodeKey(keyPrefix) + "*}:" + tagBlock
	var keys []string
	for scans := 0; scans < blockScansPerPage && len(keys) < count && node < len(nodes); scans++ {
		var batch []string
		var next uint64
		err := s.bounded(ctx, "blocks", func(ctx context.Context) (err error) {
			batch, next, err = nodes[node].Scan(ctx, pos, pattern, int64(count)).Result()
			return err
		})
		if err != nil {
			return nil, "", backendError("blocks", err)
		}
		keys = append(keys, batch...)
		if pos = next; pos == 0 {
			node++
		}
	}
	next := ""
	if node < len(nodes) {
		next = strconv.Itoa(node) + "-" + strconv.FormatUint(pos, 10)
	}
	blocks, err := s.readBlocks(ctx, keys)
	return blocks, next, err
}

// parseScanCursor returns the master and SCAN position a cursor of
// Blocks names: "<master>-<redis cursor>", or "" for the start.
func parseScanCursor(cursor string, nodes int) (node int, pos uint64, err error) {
	if cursor == "" {
		return 0, 0, nil
	}
	n, p, ok := strings.Cut(cursor, "-")
	node, err1 := strconv.Atoi(n)
	pos, err2 := strconv.ParseUint(p, 10, 64)
	if !ok || err1 != nil || err2 != nil || node < 0 || node >= nodes {
		return 0, 0, fmt.Errorf("%w: block listing: invalid cursor %q", store.ErrInvalidRequest, cursor)
	}
	return node, pos, nil
}

// scanNodes returns the clients to scan: every master of a cluster,
// sorted by address, or the client itself.
func (s *redisStore) scanNodes(ctx context.Context) ([]redis.UniversalClient, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return []redis.UniversalClient{s.client}, nil
	}
	var mu sync.Mutex
	var masters []*redis.Client
	err := s.bounded(ctx, "blocks", func(ctx context.Context) error {
		return cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			masters = append(masters, c)
			mu.Unlock()
			return nil
		})
	})
	if err != nil {
		return nil, backendError("blocks", err)
	}
	sort.Slice(masters, func(i, j int) bool { return masters[i].Options().Addr < masters[j].Options().Addr })
	out := make([]redis.UniversalClient, len(masters))
	for i, m := range masters {
		out[i] = m
	}
	return out, nil
}

// readBlocks fetches the scope and remaining time of the block keys, in
// one pipeline, and decodes their request keys. Keys that expired
// meanwhile are left out.
func (s *redisStore) readBlocks(ctx context.Context, keys []string) ([]store.Block, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pipe := s.client.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	err := s.bounded(ctx, "blocks", func(ctx context.Context) error {
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, backendError("blocks", err)
	}
	out := make([]store.Block, 0, len(keys))
	for i, k := range keys {
		scope, err := gets[i].Result()
		ttl := ttls[i].Val()
		if err != nil || ttl <= 0 {
			continue // expired between SCAN and GET
		}
		key, ok := decodeBlockKey(s.prefix, k)
		if !ok {
			continue
		}
		out = append(out, store.Block{Key: key, Scope: scope, Remaining: ttl})
	}
	return out, nil
}

// decodeBlockKey returns the request key of a block key
// "<prefix>:{<encoded key>}:block". It reports false for a key it cannot
// decode, such as a hashed one.
func decodeBlockKey(prefix, k string) (string, bool) {
	enc, ok := strings.CutPrefix(k, prefix+":{")
	if !ok {
		return "", false
	}
	if enc, ok = strings.CutSuffix(enc, "}:"+tagBlock); !ok {
		return "", false
	}
	return decodeKey(enc)
}

// decodeKey undoes [encodeKey] for a key that was escaped, not hashed: it
// reports false for a hashed form ('~' and a SHA-256) or a malformed
// escape.
func decodeKey(enc string) (string, bool) {
	if strings.HasPrefix(enc, "~") {
		return "", false
	}
	if !strings.Contains(enc, "%") {
		return enc, true
	}
	b := make([]byte, 0, len(enc))
	for i := 0; i < len(enc); i++ {
		if enc[i] != '%' {
			b = append(b, enc[i])
			continue
		}
		if i+2 >= len(enc) {
			return "", false
		}
		v, err := strconv.ParseUint(enc[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b = append(b, byte(v))
		i += 2
	}
	return string(b), true
}

// globEscape escapes the SCAN MATCH metacharacters of s.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// bounded runs call, one call of an administrative operation op to Redis,
// with ctx cut at the store's Timeout, and returns its error; once the
// budget or ctx's earlier deadline passes it returns a timeout without
// waiting for call, which a client that does not cut socket I/O at
// deadlines (go-redis's ContextTimeoutEnabled false) ends at its own
// ReadTimeout. Decisions are bounded by their pipeline instead (see do);
// this is for the calls that cannot travel in one, such as SCAN. What
// call writes, the caller reads only after a nil error. A panic of call (a
// client hook's) is returned as an error.
func (s *redisStore) bounded(ctx context.Context, op string, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("redisstore: %s: panic: %v", op, r)
			}
		}()
		done <- call(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// call may still be about to answer; a reply that came in time
		// wins over the deadline.
		select {
		case err := <-done:
			return err
		default:
		}
		return ctx.Err()
	}
}
