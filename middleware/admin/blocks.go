package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// ErrBadCursor is returned (wrapped) by a [BlockLister] given a cursor it
// did not issue; the API answers 400.
var ErrBadCursor = errors.New("ratekeeper: admin: invalid cursor")

// Block is one blocked client, as a [BlockLister] finds it.
type Block struct {
	// Key is the client's store key: the policy name, "/" and the tier
	// for a policy with tiers, ":" and the identity ("login:203.0.113.7",
	// "api/authenticated:alice").
	Key string
	// Scope names the limit whose refusal started the block.
	Scope string
	// Remaining is how long the block still lasts.
	Remaining time.Duration
}

// BlockLister lists the blocked clients whose store keys start with
// keyPrefix ("login:", or "api/" for every tier of a policy with tiers),
// a page at a time: it returns about count blocks and the cursor of the
// next page, "" when the listing is complete. An empty cursor starts
// a listing. A page may hold fewer than count blocks, even none, before
// the listing is complete; a client may be listed twice, and one blocked
// or unblocked while the listing runs may be missed, as with Redis SCAN.
type BlockLister interface {
	Blocks(ctx context.Context, keyPrefix, cursor string, count int) (blocks []Block, next string, err error)
}

// scansPerPage bounds the SCAN calls of one page, so that a page costs a
// bounded amount of work however sparse the blocks are among the keys.
const scansPerPage = 16

// RedisBlocks returns a [BlockLister] for a Redis store whose keys start
// with prefix (redisstore.Options.Prefix; "" means redisstore.DefaultPrefix).
// It scans for the store's block keys ("<prefix>:{<enc key>}:block", see
// package redisstore) with SCAN MATCH and COUNT count, stopping once it
// has count keys or after 16 SCAN calls (SCAN's COUNT is a hint: a page
// may hold a few more than count), then reads each block's scope and remaining time in one
// pipeline. It never uses KEYS.
//
// On a Redis Cluster (a *redis.ClusterClient) every master is scanned, one
// after the other in the order of their addresses: the cursor names the
// master and the position in its keyspace. Replicas hold copies and are
// not scanned. A cluster whose masters change while a listing runs (a
// failover, resharding) may see blocks missed or listed twice.
//
// Identities whose encoded form is longer than redisstore.MaxEncodedLen
// are stored hashed, cannot be matched by their policy's name, and are not
// listed. The returned lister is safe for concurrent use.
func RedisBlocks(c redis.UniversalClient, prefix string) BlockLister {
	if prefix == "" {
		prefix = redisstore.DefaultPrefix
	}
	return &redisBlocks{c: c, prefix: prefix}
}

type redisBlocks struct {
	c      redis.UniversalClient
	prefix string
}

// Blocks implements BlockLister. The cursor is "<master>-<redis cursor>".
func (rb *redisBlocks) Blocks(ctx context.Context, keyPrefix, cursor string, count int) ([]Block, string, error) {
	if count < 1 {
		return nil, "", errors.New("ratekeeper: admin: Blocks: count must be positive")
	}
	nodes, err := rb.nodes(ctx)
	if err != nil {
		return nil, "", err
	}
	node, pos := 0, uint64(0)
	if cursor != "" {
		n, p, ok := strings.Cut(cursor, "-")
		var err1, err2 error
		node, err1 = strconv.Atoi(n)
		pos, err2 = strconv.ParseUint(p, 10, 64)
		if !ok || err1 != nil || err2 != nil || node < 0 || node >= len(nodes) {
			return nil, "", fmt.Errorf("%w %q", ErrBadCursor, cursor)
		}
	}
	pattern := globEscape(rb.prefix) + ":{" + redisstore.EncodeKey(keyPrefix) + "*}:block"
	var keys []string
	for scans := 0; scans < scansPerPage && len(keys) < count; scans++ {
		batch, next, err := nodes[node].Scan(ctx, pos, pattern, int64(count)).Result()
		if err != nil {
			return nil, "", fmt.Errorf("ratekeeper: admin: scan: %w", err)
		}
		keys = append(keys, batch...)
		pos = next
		if pos == 0 {
			node++
			if node == len(nodes) {
				break
			}
		}
	}
	next := ""
	if node < len(nodes) {
		next = strconv.Itoa(node) + "-" + strconv.FormatUint(pos, 10)
	}
	blocks, err := rb.read(ctx, keys)
	return blocks, next, err
}

// nodes returns the clients to scan: every master of a cluster, sorted by
// address, or the client itself.
func (rb *redisBlocks) nodes(ctx context.Context) ([]redis.UniversalClient, error) {
	cc, ok := rb.c.(*redis.ClusterClient)
	if !ok {
		return []redis.UniversalClient{rb.c}, nil
	}
	var mu sync.Mutex
	var masters []*redis.Client
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		masters = append(masters, c)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ratekeeper: admin: cluster masters: %w", err)
	}
	sort.Slice(masters, func(i, j int) bool { return masters[i].Options().Addr < masters[j].Options().Addr })
	out := make([]redis.UniversalClient, len(masters))
	for i, m := range masters {
		out[i] = m
	}
	return out, nil
}

// read fetches the scope and remaining time of the block keys, in one
// pipeline, and decodes their store keys. Keys that expired meanwhile are
// left out.
func (rb *redisBlocks) read(ctx context.Context, keys []string) ([]Block, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pipe := rb.c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("ratekeeper: admin: read blocks: %w", err)
	}
	out := make([]Block, 0, len(keys))
	for i, k := range keys {
		scope, err := gets[i].Result()
		ttl := ttls[i].Val()
		if err != nil || ttl <= 0 {
			continue // expired between SCAN and GET
		}
		key, ok := decodeBlockKey(rb.prefix, k)
		if !ok {
			continue
		}
		out = append(out, Block{Key: key, Scope: scope, Remaining: ttl})
	}
	return out, nil
}

// decodeBlockKey returns the store key of a block key
// "<prefix>:{<enc key>}:block", undoing redisstore.EncodeKey's escapes.
// It reports false for a key it cannot decode, such as a hashed one.
func decodeBlockKey(prefix, k string) (string, bool) {
	enc, ok := strings.CutPrefix(k, prefix+":{")
	if !ok {
		return "", false
	}
	if enc, ok = strings.CutSuffix(enc, "}:block"); !ok || strings.HasPrefix(enc, "~") {
		return "", false
	}
	return decodeKey(enc)
}

// decodeKey undoes redisstore.EncodeKey for a key that was escaped, not
// hashed: it reports false for a hashed form ('~' and a SHA-256) or a
// malformed escape.
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
