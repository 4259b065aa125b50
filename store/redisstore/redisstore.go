package redisstore

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// defaultPrefix is the default [Options.Prefix]: it starts every key the
// store writes.
const defaultPrefix = "rk"

// Defaults for the zero fields of [Options].
const (
	defaultTimeout       = 50 * time.Millisecond
	defaultClusterReload = time.Second
	defaultMaxBatch      = 128
	defaultDenyCacheSize = 65536
	defaultLoneSpin      = 100 * time.Microsecond
)

// Options configures the store [New] returns. The zero value selects every default; New
// reads the fields and never writes to them.
type Options struct {
	// Prefix starts every key, followed by ':'. Default "rk".
	// It must not contain '{' or '}', which would change the Redis Cluster
	// hash tag. Use distinct prefixes to keep applications (or tests) that
	// share one Redis apart.
	Prefix string
	// Timeout is the decision budget, the only one: every Take, Peek and
	// Reset returns by the earlier of ctx's deadline and now+Timeout,
	// whatever the client's own timeouts, even when the client ignores
	// context deadlines (go-redis ContextTimeoutEnabled false, its
	// default) and Redis stops answering. Waiting for a pooled connection
	// or a batch counts against it. Zero means 50ms; negative is an
	// error.
	Timeout time.Duration
	// ClusterReload is, for a cluster client (one with a ReloadState
	// method, such as *redis.ClusterClient), the shortest interval between
	// topology reloads the store triggers itself after a connection or
	// timeout error. go-redis otherwise reloads only every 60 s or on a
	// MOVED reply, so after a master fails over, calls for its slots keep
	// failing until then; with this, recovery follows the failover within
	// about ClusterReload. Zero means one second; negative disables.
	// Other clients ignore it.
	ClusterReload time.Duration
	// MaxBatch bounds how many decisions travel to Redis in one pipeline.
	// Concurrent decisions are coalesced: a decision is sent at once when
	// no pipeline is being written to its node, and decisions that arrive
	// meanwhile go together in the next one, so a lone caller waits for
	// nothing and a crowd shares round trips. Zero means 128; 1 sends
	// every decision on its own; negative is an error. With 1 every
	// decision pays a round trip of its own, which costs Redis three to
	// four times the CPU of a batched decision and the client about three
	// times (docs/capacity.md), and under many concurrent decisions those
	// round trips queue against the Timeout: set it only where the
	// decisions in flight per process stay few.
	MaxBatch int
	// OneCallEach sends every decision as its own script call. By
	// default, through a *redis.Client, the plain decisions of one
	// algorithm that share a pipeline are one call of the algorithm's
	// lean batch script (package lua), which names all their keys, and
	// the stacked decisions of one lean stacked script one call of its
	// stacked batch: set
	// OneCallEach when the client talks to Redis through a proxy that
	// routes a script by its first key (twemproxy, Envoy's Redis proxy),
	// which would send the other keys' state to the wrong server.
	// Cluster and Ring clients always send one call per decision.
	OneCallEach bool
	// LoneSpin bounds how long a lone call, one made through a
	// *redis.Client while nothing else is queued or in flight to Redis,
	// polls its socket for the reply before it sleeps until the reply
	// comes. A caller that sleeps pays for waking up twice, its thread
	// and then its goroutine, which on a host whose cores go idle between
	// calls costs more than a nearby server's round trip; one that polls
	// stays awake, and spends less CPU than the wake-ups would when the
	// reply comes within the window. The store polls only while most
	// polls catch their reply (a distant server's never come within the
	// window), and then tries again on one lone call in 16. Zero means
	// 100µs; negative never polls. Cluster and Ring clients, and
	// platforms without raw socket access (Windows), never poll.
	LoneSpin time.Duration
	// Logger receives the store's warnings (an unsafe eviction policy,
	// see EvictionPolicy). Nil means slog.Default().
	Logger *slog.Logger
	// DenyCacheSize bounds the local cache of refusals: a key refused with
	// RetryAfter T is refused again without a round trip until T has
	// passed (see Take). Zero means 65536 refusals; negative
	// disables the cache.
	DenyCacheSize int
	// Rand returns the uniform random value in [0, 1) that a request of
	// the suppressed strategy (package store/suppressed) is drawn against (one per request,
	// Take or Peek). It is drawn here and passed to the script, which has
	// no randomness of its own, so that replicas replay the same decision
	// and tests can inject the sequence. Nil means math/rand/v2's
	// Float64. A value outside [0, 1) is clamped into it (NaN counts as
	// 0). It must be safe for concurrent use.
	Rand func() float64
	// WarmUp bounds the warm-up New does before it returns, so that the
	// first decisions pay neither a connection's handshake nor a
	// script's first load within their budget: on the node (every
	// master of a cluster, every shard of a ring) it opens as many
	// connections as the store may keep in flight to one node (16,
	// fewer when the client's PoolSize is smaller), each through its
	// handshake, as many pipelines at once (go-redis keeps their
	// connections in a pool of their own, PipelinePoolSize), and loads
	// every built-in script (SCRIPT LOAD). New returns when that is done
	// or WarmUp has passed; a warm-up that fails or runs out of time is
	// logged to Logger, not an error, and the store then connects and
	// loads scripts on first use. Zero means one second; negative skips
	// the warm-up, and New then contacts nothing. The connections stay
	// in the client's pool while go-redis keeps them (ConnMaxIdleTime,
	// 30 minutes by default); set the client's MinIdleConns to keep them
	// always. See the package documentation, "Warm-up".
	//
	// Without the warm-up, the first decisions open their connections at
	// once, and go-redis (v9.23 at least) settles in each first handshake
	// whether the server takes maintenance notifications, writing the
	// answer to the client's options while other handshakes read them
	// without a lock: a data race in go-redis, which the race detector
	// reports. The warm-up opens the first connection alone. A client
	// whose options disable maintenance notifications
	// (MaintNotificationsConfig with Mode maintnotifications.ModeDisabled)
	// settles nothing, and may skip the warm-up safely.
	WarmUp time.Duration
}

// reloader is implemented by cluster clients (*redis.ClusterClient).
type reloader interface {
	ReloadState(ctx context.Context)
}

// redisStore is the [store.Store] that [New] returns: it keeps state in
// Redis and makes every decision with one Lua script, so that all
// processes sharing the Redis share the limits. It works with single
// nodes, Sentinel and Cluster: every key of a decision carries the same
// hash tag.
//
// A redisStore is safe for concurrent use and holds no lock around network I/O.
// Scripts run with EVALSHA and fall back to EVAL when the server does not
// have them (after a restart or SCRIPT FLUSH). Script calls are sent with
// the client's re-send on failure switched off (go-redis re-sends a
// command whose connection broke, although Redis may have run it): a call
// whose outcome is unknown fails once instead of counting twice.
type redisStore struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	scripts *scriptTable
	rand    func() float64 // never nil
	// clock, when set, replaces time.Now for the calendar windows' bounds
	// (calendar.go): tests whose scripts run on a fake clock set it.
	clock  func() time.Time
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
	killing      atomic.Bool   // a SCRIPT KILL is under way (see stopScript)
}

var _ store.Store = (*redisStore)(nil)

// New returns a [store.Store] that runs on client with opts. It returns an
// error for a nil client or invalid options. Unless [Options.WarmUp] is
// negative it opens connections and loads the scripts before it returns,
// waiting at most WarmUp; Redis being down or slow then is not an error.
// Besides [store.Store] the value
// implements [store.MultiStore], [store.OverrideStore], [store.BlockLister],
// [store.EvictionPolicyReporter], [store.Refunder], [store.NodeLocator] and
// [store.SlotStore]; reach them by type assertion.
func New(client redis.UniversalClient, opts Options) (store.Store, error) {
	s, err := newRedis(client, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newRedis is [New] with the concrete type.
func newRedis(client redis.UniversalClient, opts Options) (*redisStore, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	s := &redisStore{client: client, rand: opts.Rand}
	maxBatch, err := s.configure(&opts)
	if err != nil {
		return nil, err
	}
	if s.scripts, err = builtinScripts(); err != nil {
		return nil, err
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	if r, ok := client.(reloader); ok && opts.ClusterReload >= 0 {
		s.reloader = r
		s.reloadEvery = orDefault(opts.ClusterReload, defaultClusterReload)
	}
	s.pipes = newPipes(client, maxBatch, s.timeout)
	if opts.LoneSpin >= 0 {
		s.pipes.spin = orDefault(opts.LoneSpin, defaultLoneSpin)
	}
	if opts.OneCallEach {
		s.pipes.merge.Store(false)
	}
	s.eviction.logger = opts.Logger
	if s.eviction.logger == nil {
		s.eviction.logger = slog.Default()
	}
	s.pipes.warm = newWarmer(s.scripts, s.eviction.logger)
	s.pipes.warm.timed = s.pipes.timed
	if opts.WarmUp >= 0 {
		s.pipes.warm.warm(client, orDefault(opts.WarmUp, defaultWarmUp))
		if s.pipes.lone != nil && s.pipes.lone.take() != nil {
			s.pipes.lone.release() // held already (another store on the client)
		} // else the search for one has started in the background
	}
	var seed [8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("redisstore: random nonce seed: %w", err)
	}
	s.nonceBase = base64.RawURLEncoding.EncodeToString(seed[:])
	return s, nil
}

// configure checks opts and sets the store's prefix, timeout and deny
// cache from them; it returns the batch size.
func (s *redisStore) configure(opts *Options) (maxBatch int, err error) {
	s.prefix = orDefault(opts.Prefix, defaultPrefix)
	switch {
	case strings.ContainsAny(s.prefix, "{}"):
		return 0, fmt.Errorf("redisstore: Prefix %q contains a brace", s.prefix)
	case opts.Timeout < 0:
		return 0, fmt.Errorf("redisstore: negative Timeout %s", opts.Timeout)
	case opts.MaxBatch < 0:
		return 0, fmt.Errorf("redisstore: negative MaxBatch %d", opts.MaxBatch)
	}
	s.timeout = orDefault(opts.Timeout, defaultTimeout)
	if opts.DenyCacheSize >= 0 {
		s.deny = newDenyCache(orDefault(opts.DenyCacheSize, defaultDenyCacheSize))
	}
	return orDefault(opts.MaxBatch, defaultMaxBatch), nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
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
// Reset made through another Store (another process) is not seen by the
// cache. So a cached refusal answers for 250 ms at most; the next request
// after that asks Redis again (and caches its refusal anew), and such a
// Reset takes effect here within 250 ms. A changed limit is a different
// limit and is asked afresh.
//
// Block times come from the block key's TTL and so have millisecond
// resolution: RetryAfter of a blocked request is the key's PTTL (or later,
// when a limit refuses beyond the block), never shorter than the block's
// true remaining time.
func (s *redisStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.decide(ctx, modeTake, req)
}

// Peek returns the decision Take would return now without writing
// anything to Redis: an existing block, a remembered de-duplication id, or
// else the limits' verdict. Where Take would start a block, Peek reports
// the refusal without Blocked, since no block exists yet. A refusal cached
// by Take answers Peek too. Errors are as for Take.
func (s *redisStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
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
func (s *redisStore) Reset(ctx context.Context, req store.Request) error {
	keys, err := s.StateKeys(req)
	if err != nil {
		return err
	}
	return s.reset(ctx, req, keys)
}

// Suppress implements contract.Suppressor: req, checked by package
// store/suppressed, is decided like any other request.
func (s *redisStore) Suppress(ctx context.Context, req store.Request, mode contract.Mode) (store.Decision, error) {
	switch mode {
	case contract.Take:
		return s.run(ctx, modeTake, req)
	case contract.Peek:
		return s.run(ctx, modePeek, req)
	}
	return store.Decision{}, s.reset(ctx, req, s.stateKeys(req))
}

// reset is Reset on a request already checked, whose state keys are keys.
func (s *redisStore) reset(ctx context.Context, req store.Request, keys []string) error {
	if s.deny != nil {
		s.deny.forget(keys[0])
	}
	keys = appendKeyKeys(keys, keyBase(s.prefix, encodeKey(req.Key)))
	args := make([]any, 0, 1+len(keys))
	args = append(args, "del")
	for _, k := range keys {
		args = append(args, k)
	}
	v, err := s.do(ctx, "reset", &command{key: keys[0], args: args})
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
func (s *redisStore) delEach(ctx context.Context, keys []string) (any, error) {
	var n int64
	for _, k := range keys {
		v, err := s.do(ctx, "reset", &command{key: k, args: []any{"del", k}})
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
func (s *redisStore) StateKeys(req store.Request) ([]string, error) {
	req.Cost = 0 // not part of the state's identity
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return s.stateKeys(req), nil
}

// stateKeys is StateKeys on a request already checked.
func (s *redisStore) stateKeys(req store.Request) []string {
	base := keyBase(s.prefix, encodeKey(req.Key))
	return appendStateKeys(make([]string, 0, len(req.Limits)), base, req.Limits)
}

// decide runs the request's script in mode take or peek: a refusal the
// deny cache holds answers without a round trip, and a refusal Redis
// answers to a cacheable call is remembered.
func (s *redisStore) decide(ctx context.Context, mode string, req store.Request) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	return s.run(ctx, mode, req)
}

// run is decide on a request already checked.
func (s *redisStore) run(ctx context.Context, mode string, req store.Request) (store.Decision, error) {
	if err := ctx.Err(); err != nil {
		return store.Decision{}, backendError(mode, err)
	}
	s.eviction.start(s.client)
	cost := contract.Cost(&req)
	start := time.Now()
	cmd := s.command(mode, &req, cost)
	cmd.start = start
	if d, ok := cmd.refusal.cached(start); ok {
		cmd.drop()
		return d, nil
	}
	v, err := s.do(ctx, mode, &cmd)
	if err != nil {
		if req.ApplyOverride && strings.Contains(err.Error(), costReply) {
			// The override left a limit that does not hold the cost (see
			// package lua, step 0).
			return store.Decision{}, fmt.Errorf("%w: cost %d, under the key's override (%v)", store.ErrCostExceedsCapacity, cost, err)
		}
		return store.Decision{}, err
	}
	if d, ok := v.(store.Decision); ok {
		return d, nil // a refusal cached while the call was queued
	}
	d, err := cmd.decode(v, &req, cost)
	if err != nil {
		return store.Decision{}, backendError(mode, err)
	}
	cmd.refusal.remember(start, d)
	return d, nil
}

// do sends cmd and waits for its reply within the budget: the store's
// Timeout or ctx's earlier deadline. Errors are *store.BackendError.
func (s *redisStore) do(ctx context.Context, op string, cmd *command) (any, error) {
	// The call may outlive this one (answered at its deadline while still
	// in flight): it keeps the request's own context, never a pooled one.
	ctx = keybuf.Unlent(ctx)
	if cmd.start.IsZero() {
		cmd.start = time.Now()
	}
	deadline := cmd.start.Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	v, err := s.pipes.do(ctx, cmd, deadline)
	if err != nil {
		return nil, s.failed(op, err)
	}
	return v, nil
}

// failed classifies err and, for a cluster client whose node may have
// failed over, triggers a topology reload (at most one per reloadEvery, in
// the background, never on the request's time).
func (s *redisStore) failed(op string, err error) *store.BackendError {
	be := backendError(op, err)
	if s.reloader != nil && (be.Kind == "connection" || be.Kind == "timeout") {
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
func (s *redisStore) Name() string { return "redis" }

// CopiesLentKeys implements keybuf.Copier: the store reads a request's key
// only while the call that carries it runs in its caller's goroutine,
// where it builds the Redis keys it sends (keyOf, keyBase: copies); what
// outlives the call (a queued or abandoned script call, a cached refusal,
// an error's text) holds those copies, and a script call keeps the
// context the lender wraps (keybuf.Unlent, in do), never the lender. The
// middleware may then lend a request's own memory for its key, which
// saves an allocation per decision.
func (*redisStore) CopiesLentKeys(*keybuf.Buffer) {}
