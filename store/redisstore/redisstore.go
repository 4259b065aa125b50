package redisstore

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// Defaults for the zero fields of [Options].
const (
	// DefaultPrefix starts every key the store writes.
	DefaultPrefix = "rk"
	// DefaultTimeout is the decision budget: the longest one Take, Peek or
	// Reset waits for Redis.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultClusterReload is the default [Options.ClusterReload].
	DefaultClusterReload = time.Second
	// DefaultMaxBatch is the default [Options.MaxBatch].
	DefaultMaxBatch = 128
	// DefaultDenyCacheSize is the default [Options.DenyCacheSize].
	DefaultDenyCacheSize = 65536
)

// Options configures a [Store]. The zero value selects every default; New
// reads the fields and never writes to them.
type Options struct {
	// Prefix starts every key, followed by ':'. Default [DefaultPrefix].
	// It must not contain '{' or '}', which would change the Redis Cluster
	// hash tag. Use distinct prefixes to keep applications (or tests) that
	// share one Redis apart.
	Prefix string
	// Timeout is the decision budget, the only one: every Take, Peek and
	// Reset returns by the earlier of ctx's deadline and now+Timeout,
	// whatever the client's own timeouts, even when the client ignores
	// context deadlines (go-redis ContextTimeoutEnabled false, its
	// default) and Redis stops answering. Waiting for a pooled connection
	// or a batch counts against it. Default [DefaultTimeout]; negative is
	// an error.
	Timeout time.Duration
	// ClusterReload is, for a cluster client (one with a ReloadState
	// method, such as *redis.ClusterClient), the shortest interval between
	// topology reloads the store triggers itself after a connection or
	// timeout error. go-redis otherwise reloads only every 60 s or on a
	// MOVED reply, so after a master fails over, calls for its slots keep
	// failing until then; with this, recovery follows the failover within
	// about ClusterReload. Zero means [DefaultClusterReload]; negative
	// disables. Other clients ignore it.
	ClusterReload time.Duration
	// MaxBatch bounds how many decisions travel to Redis in one pipeline.
	// Concurrent decisions are coalesced: a decision is sent at once when
	// no pipeline is being written to its node, and decisions that arrive
	// meanwhile go together in the next one, so a lone caller waits for
	// nothing and a crowd shares round trips. Zero means
	// [DefaultMaxBatch]; 1 sends every decision on its own; negative is an
	// error.
	MaxBatch int
	// Logger receives the store's warnings (an unsafe eviction policy,
	// see [Store.EvictionPolicy]). Nil means slog.Default().
	Logger *slog.Logger
	// DenyCacheSize bounds the local cache of refusals: a key refused with
	// RetryAfter T is refused again without a round trip until T has
	// passed (see [Store.Take]). Zero means [DefaultDenyCacheSize];
	// negative disables the cache.
	DenyCacheSize int
	// Rand returns the uniform random value in [0, 1) that a request of
	// the [store.Suppressed] strategy is drawn against (one per request,
	// Take or Peek). It is drawn here and passed to the script, which has
	// no randomness of its own, so that replicas replay the same decision
	// and tests can inject the sequence. Nil means math/rand/v2's
	// Float64. A value outside [0, 1) is clamped into it (NaN counts as
	// 0). It must be safe for concurrent use.
	Rand func() float64
}

// reloader is implemented by cluster clients (*redis.ClusterClient).
type reloader interface {
	ReloadState(ctx context.Context)
}

// script is one Lua script: its source and SHA-1.
type script struct {
	src string
	sha string
}

// Store is a [store.Store] that keeps state in Redis and makes every
// decision with one Lua script, so that all processes sharing the Redis
// share the limits. It works with single nodes, Sentinel and Cluster: every
// key of a decision carries the same hash tag.
//
// A Store is safe for concurrent use and holds no lock around network I/O.
// Scripts run with EVALSHA and fall back to EVAL when the server does not
// have them (after a restart or SCRIPT FLUSH). Script calls are sent with
// the client's re-send on failure switched off (go-redis re-sends a
// command whose connection broke, although Redis may have run it): a call
// whose outcome is unknown fails once instead of counting twice.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	scripts [store.Suppressed + 1][2]script // [algorithm][lean]
	// The lean scripts with overrides, by algorithm (none for the
	// suppressed strategy).
	leanOv [store.Suppressed + 1]script
	rand   func() float64 // never nil
	limits limitCache
	deny   *denyCache // nil when disabled
	pipes  *pipes

	eviction evictionCheck

	nonceBase string
	seq       atomic.Uint64

	stack stackCounts // refunds of stacked decisions (multi.go)

	reloader     reloader      // the client, when it is a cluster client
	reloadEvery  time.Duration // minimum interval between reloads
	lastReloadNS atomic.Int64  // unix nanos of the last triggered reload
}

var _ store.Store = (*Store)(nil)

// New returns a Store that runs on client with opts. It returns an error
// for a nil client or invalid options; it does not contact Redis (scripts
// are sent on first use).
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	s := &Store{client: client, prefix: opts.Prefix, timeout: opts.Timeout}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if strings.ContainsAny(s.prefix, "{}") {
		return nil, fmt.Errorf("redisstore: Prefix %q contains a brace", s.prefix)
	}
	switch {
	case s.timeout < 0:
		return nil, fmt.Errorf("redisstore: negative Timeout %s", s.timeout)
	case s.timeout == 0:
		s.timeout = DefaultTimeout
	}
	maxBatch := opts.MaxBatch
	switch {
	case maxBatch < 0:
		return nil, fmt.Errorf("redisstore: negative MaxBatch %d", maxBatch)
	case maxBatch == 0:
		maxBatch = DefaultMaxBatch
	}
	switch size := opts.DenyCacheSize; {
	case size == 0:
		s.deny = newDenyCache(DefaultDenyCacheSize)
	case size > 0:
		s.deny = newDenyCache(size)
	}
	s.rand = opts.Rand
	if s.rand == nil {
		s.rand = rand.Float64
	}
	for _, alg := range append(store.Algorithms[:len(store.Algorithms):len(store.Algorithms)], store.Suppressed) {
		for v, lean := range []bool{false, true} {
			src, err := lua.Source(alg.String(), lean)
			if err != nil {
				return nil, fmt.Errorf("redisstore: %w", err)
			}
			s.scripts[alg][v] = script{src: src, sha: redis.NewScript(src).Hash()}
		}
		if alg != store.Suppressed {
			src, err := lua.SourceWithOverrides(alg.String())
			if err != nil {
				return nil, fmt.Errorf("redisstore: %w", err)
			}
			s.leanOv[alg] = script{src: src, sha: redis.NewScript(src).Hash()}
		}
	}
	if r, ok := client.(reloader); ok && opts.ClusterReload >= 0 {
		s.reloader = r
		s.reloadEvery = opts.ClusterReload
		if s.reloadEvery == 0 {
			s.reloadEvery = DefaultClusterReload
		}
	}
	s.pipes = newPipes(client, maxBatch)
	s.eviction.logger = opts.Logger
	if s.eviction.logger == nil {
		s.eviction.logger = slog.Default()
	}
	var seed [8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("redisstore: random nonce seed: %w", err)
	}
	s.nonceBase = base64.RawURLEncoding.EncodeToString(seed[:])
	return s, nil
}

// Take checks req against every limit and records it in all of them only
// if all admit it, in one atomic script that also applies the key's block,
// starts blocks, counts refusals ([store.Request.CountDenied]) and
// de-duplicates ([store.Request.DedupID]) as package store specifies. A
// request with one limit and none of those features runs a lean script
// that does only its algorithm's arithmetic, except for the suppressed
// strategy, which always runs its full script and is never answered from
// the deny cache.
//
// Before any I/O it returns req.Validate's error for an invalid request. It
// returns a *store.BackendError when Redis fails or does not answer within
// the timeout; the request was then recorded (and a block started) once or
// not at all, never twice.
//
// Refusals are cached locally (unless [Options.DenyCacheSize] is
// negative): a request of the lean kind (one limit, no block, no counted
// refusals, no de-duplication id, no overrides) refused with RetryAfter T is refused
// again without a round trip until T has passed, measured from before the
// call was sent, for requests of the same key and limit with at least the
// same cost; such decisions report [store.Decision.Cached]. A refusal
// records nothing and only time frees capacity, so this refuses nothing
// Redis would admit, with one exception an operator should know: a
// [Store.Reset] made through another Store (another process) takes effect
// here only once T has passed. A changed limit is a different limit and
// is asked afresh.
//
// Block times come from the block key's TTL and so have millisecond
// resolution: RetryAfter of a blocked request is the key's PTTL (or later,
// when a limit refuses beyond the block), never shorter than the block's
// true remaining time.
func (s *Store) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.decide(ctx, modeTake, req)
}

// Peek returns the decision Take would return now without writing
// anything to Redis: an existing block, a remembered de-duplication id, or
// else the limits' verdict. Where Take would start a block, Peek reports
// the refusal without Blocked, since no block exists yet. A refusal cached
// by Take answers Peek too. Errors are as for Take.
func (s *Store) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.decide(ctx, modePeek, req)
}

// Reset deletes the state of req.Key under req.Limits (for the sliding
// window log, the log of exactly that set of limits) and the key's block,
// strike counter and remembered de-duplication ids, which every limit of
// the key shares, and forgets cached refusals of the key under these
// limits. State of the key under other limits is kept. req.Cost is
// ignored; otherwise it returns req.Validate's error for an invalid
// request, an error wrapping [store.ErrNotFound] when Redis held none of
// these keys, and a *store.BackendError when Redis fails or does not
// answer within the timeout.
func (s *Store) Reset(ctx context.Context, req store.Request) error {
	keys, err := s.StateKeys(req)
	if err != nil {
		return err
	}
	if s.deny != nil {
		s.deny.forget(keys[0])
	}
	keys = appendKeyKeys(keys, keyBase(s.prefix, EncodeKey(req.Key)))
	args := make([]any, 0, 1+len(keys))
	args = append(args, "del")
	for _, k := range keys {
		args = append(args, k)
	}
	v, err := s.do(ctx, "reset", keys[0], nil, args, nil, nil, 0)
	if err != nil && isTryAgain(err) {
		// The slot is being migrated and the keys are split between its
		// nodes (or some exist nowhere): delete them one at a time, each
		// where it is (a single-key command follows ASK).
		v, err = s.delEach(ctx, keys)
	}
	if err != nil {
		return err
	}
	if n, ok := v.(int64); !ok {
		return backendError("reset", fmt.Errorf("%w: DEL answered %T", errBadReply, v))
	} else if n == 0 {
		return fmt.Errorf("redisstore: reset %q: %w", req.Key, store.ErrNotFound)
	}
	return nil
}

// delEach deletes keys one DEL at a time and answers how many existed, as
// one DEL of them all would: the Reset of a client whose slot is being
// migrated. It is not atomic: a decision made meanwhile may see some of
// the keys deleted and others not, as it could see them all before or
// after.
func (s *Store) delEach(ctx context.Context, keys []string) (any, error) {
	var n int64
	for _, k := range keys {
		v, err := s.do(ctx, "reset", k, nil, []any{"del", k}, nil, nil, 0)
		if err != nil {
			return nil, err
		}
		d, ok := v.(int64)
		if !ok {
			return v, nil
		}
		n += d
	}
	return n, nil
}

// StateKeys returns the Redis keys that hold req's per-limit state: one
// per limit in request order, or for the sliding window log the one sorted
// set shared by all limits of the request. The key's block, strike counter
// and de-duplication hash ("<prefix>:{<enc key>}:block", ":strikes",
// ":dedup") are not included. req.Cost is ignored; otherwise it returns
// req.Validate's error for an invalid request.
func (s *Store) StateKeys(req store.Request) ([]string, error) {
	req.Cost = 0 // not part of the state's identity
	if err := req.Validate(); err != nil {
		return nil, err
	}
	base := keyBase(s.prefix, EncodeKey(req.Key))
	return appendStateKeys(make([]string, 0, len(req.Limits)), base, req.Limits), nil
}

// costReply starts the error a full script answers, for a request that
// reads overrides, when no override admits its cost.
const costReply = "RKCOST "

// Script modes (ARGV[1]).
const (
	modeTake = "take"
	modePeek = "peek"
)

// lean reports whether req is of the lean kind: one limit, no block, no
// counted refusals, no de-duplication id, no override. The suppressed
// strategy has no lean script; see [Store.command].
func lean(req *store.Request) bool {
	return len(req.Limits) == 1 && req.Limits[0].Block == 0 && !req.CountDenied && req.DedupID == "" && !req.Overrides
}

// leanWithOverrides reports a request that would be lean but applies its
// key's override: it runs the lean script that reads the override first
// (except under the suppressed strategy, which has no lean script).
func leanWithOverrides(req *store.Request) bool {
	return len(req.Limits) == 1 && req.Limits[0].Block == 0 && !req.CountDenied && req.DedupID == "" && req.Overrides
}

// decide runs the algorithm's script in mode take or peek.
func (s *Store) decide(ctx context.Context, mode string, req store.Request) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Decision{}, backendError(mode, err)
	}
	s.eviction.start(s.client)
	cost := contract.Cost(&req)
	start := time.Now()
	cmd := s.command(mode, &req, cost)
	// A refusal under an override is not cached: an operator's change
	// of the override must apply to the next request.
	cacheable := s.deny != nil && cmd.lean && !cmd.ov
	if cacheable {
		if d, ok := s.deny.lookup(cmd.key, cmd.li, cost, start); ok {
			return d, nil
		}
	}
	var dc *denyCache
	if cacheable {
		dc = s.deny
	}
	v, err := s.do(ctx, mode, cmd.key, cmd.sc, cmd.args, dc, cmd.li, cost)
	if err != nil {
		if req.Overrides && strings.Contains(err.Error(), costReply) {
			// The override left a limit that does not hold the cost (see
			// package lua, step 0).
			return store.Decision{}, fmt.Errorf("%w: cost %d, under the key's override (%v)", store.ErrCostExceedsCapacity, cost, err)
		}
		return store.Decision{}, err
	}
	if d, ok := v.(store.Decision); ok {
		return d, nil // a refusal cached while the call was queued
	}
	var d store.Decision
	switch {
	case cmd.ov:
		d, err = decodeLeanOverride(v, req.Limits[0], cost, cmd.li)
	case cmd.lean:
		d, err = decodeLean(v, cmd.li)
	default:
		var r reply
		if r, err = decodeReply(v, req.Limits, cost); err == nil {
			d = r.decision(req.Limits)
		}
	}
	if err != nil {
		return store.Decision{}, backendError(mode, err)
	}
	if cacheable && !d.Allowed {
		s.deny.store(cmd.key, cmd.li, cost, start, d)
	}
	return d, nil
}

// command is one script call.
type command struct {
	sc   *script
	args []any // "evalsha", sha, key count, keys..., arguments...
	key  string
	lean bool
	ov   bool       // the lean script with overrides
	li   *limitInfo // of the first limit
}

// keys returns the call's KEYS.
func (c *command) keys() []string {
	n := c.args[2].(int)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = c.args[3+i].(string)
	}
	return keys
}

// command builds the script call of a validated request: the lean script
// for one plain limit (of a counting algorithm), else the full one. key is
// the first limit's state key, in the slot of every key of the call.
func (s *Store) command(mode string, req *store.Request, cost int64) command {
	li := s.limits.get(req.Limits[0])
	alg := req.Limits[0].Algorithm
	if alg != store.Suppressed && lean(req) {
		key := s.prefix + ":{" + EncodeKey(req.Key) + "}:" + li.suffix
		sc := &s.scripts[alg][1]
		args := make([]any, 0, 10)
		args = append(args, "evalsha", sc.sha, 1, key, mode, cost, li.rate, li.period, li.capacity)
		if alg == store.SlidingWindowLog && mode == modeTake {
			args = append(args, s.nonce())
		}
		return command{sc: sc, args: args, key: key, lean: true, li: li}
	}
	base := keyBase(s.prefix, EncodeKey(req.Key))
	if alg != store.Suppressed && leanWithOverrides(req) {
		key := base + li.suffix
		sc := &s.leanOv[alg]
		args := make([]any, 0, 11)
		args = append(args, "evalsha", sc.sha, 2, key, base+tagOverride, mode, cost, li.rate, li.period, li.capacity)
		if alg == store.SlidingWindowLog && mode == modeTake {
			args = append(args, s.nonce())
		}
		return command{sc: sc, args: args, key: key, lean: true, ov: true, li: li}
	}
	sc := &s.scripts[alg][0]
	c := command{sc: sc, args: s.fullArgs(mode, base, sc, req, cost), li: li}
	c.key = c.args[3+4].(string) // the first state key
	return c
}

// blocks reports whether a limit blocks, which needs the block key.
func blocks(limits []store.Limit) bool {
	for _, l := range limits {
		if l.Block > 0 {
			return true
		}
	}
	return false
}

// escalates reports whether a limit's blocks escalate, which needs the
// strike counter.
func escalates(limits []store.Limit) bool {
	for _, l := range limits {
		if l.BlockMax > l.Block {
			return true
		}
	}
	return false
}

// fullArgs returns the EVALSHA arguments of a validated request for the
// full script; see package lua for the layout. Keys the script will not
// touch (the block key when no limit blocks, the strike counter when no
// limit escalates, the de-duplication hash without an id, the override
// when the request does not read it) are filled with a key the script
// uses: the block key when a limit blocks, else the first state key. The
// call then names only keys it needs, which matters on a Redis Cluster
// during the migration of the slot: Redis serves a multi-key command
// there only when every key it names exists on one node, and a block key
// that was never set never exists. The first key names the slot.
func (s *Store) fullArgs(mode, base string, sc *script, req *store.Request, cost int64) []any {
	n := len(req.Limits)
	args := make([]any, 0, 3+4+n+9+6*n)
	args = append(args, "evalsha", sc.sha, 0) // the key count is set below
	var stateKeys [store.MaxLimits]string
	states := appendStateKeys(stateKeys[:0], base, req.Limits)
	filler := states[0]
	if blocks(req.Limits) {
		filler = base + tagBlock
	}
	args = append(args, filler)
	if escalates(req.Limits) {
		args = append(args, base+tagStrikes)
	} else {
		args = append(args, filler)
	}
	var dedup any = ""
	var replays, window int64
	if req.DedupID != "" {
		args = append(args, base+tagDedup)
		dedup = dedupField(req.DedupID)
		replays, window = contract.DedupBound(req)
	} else {
		args = append(args, filler)
	}
	var overrides any = "0"
	if req.Overrides {
		args = append(args, base+tagOverride)
		overrides = "1"
	} else {
		args = append(args, filler)
	}
	for _, k := range states {
		args = append(args, k)
	}
	args[2] = len(args) - 3
	var countDenied any = "0"
	if req.CountDenied {
		countDenied = "1"
	}
	nonce := ""
	switch alg := req.Limits[0].Algorithm; {
	case mode == modeTake && alg == store.SlidingWindowLog:
		nonce = s.nonce()
	case alg == store.Suppressed:
		// The nonce's place carries the request's random value.
		nonce = strconv.FormatFloat(s.draw(), 'g', -1, 64)
	}
	args = append(args, mode, cost, nonce, countDenied, dedup, replays, window, n, overrides)
	for _, l := range req.Limits {
		li := s.limits.get(l)
		args = append(args, li.rate, li.period, li.capacity)
		if l.Block > 0 {
			args = append(args, l.Block.Milliseconds(), l.BlockMax.Milliseconds(), li.id)
		} else {
			args = append(args, 0, 0, "")
		}
	}
	return args
}

// draw returns the store's random value, clamped into [0, 1).
func (s *Store) draw() float64 {
	switch u := s.rand(); {
	case !(u >= 0):
		return 0
	case u >= 1:
		return math.Nextafter(1, 0)
	default:
		return u
	}
}

// nonce returns an identifier unique to one take: a random per-store part
// and a counter. Sliding window log members carry it.
func (s *Store) nonce() string {
	var b [11 + 13]byte
	n := copy(b[:], s.nonceBase)
	return string(strconv.AppendUint(b[:n], s.seq.Add(1), 36))
}

// do sends one command (a script call when sc is set) for the slot of key
// and waits for its reply within the budget. Errors are
// *store.BackendError.
func (s *Store) do(ctx context.Context, op, key string, sc *script, args []any, dc *denyCache, li *limitInfo, cost int64) (any, error) {
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	v, err := s.pipes.do(ctx, key, sc, args, deadline, dc, li, cost)
	if err != nil {
		return nil, s.failed(op, err)
	}
	return v, nil
}

// failed classifies err and, for a cluster client whose node may have
// failed over, triggers a topology reload (at most one per reloadEvery, in
// the background, never on the request's time).
func (s *Store) failed(op string, err error) *store.BackendError {
	be := backendError(op, err)
	if s.reloader != nil && (be.Kind == store.KindConnection || be.Kind == store.KindTimeout) {
		now := time.Now().UnixNano()
		last := s.lastReloadNS.Load()
		if now-last >= int64(s.reloadEvery) && s.lastReloadNS.CompareAndSwap(last, now) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.reloader.ReloadState(ctx)
			}()
		}
	}
	return be
}

// Name returns "redis", the backend name used in metrics labels.
func (s *Store) Name() string { return "redis" }
