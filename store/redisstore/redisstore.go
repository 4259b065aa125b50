package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
)

// Defaults for the zero fields of [Options].
const (
	// DefaultPrefix starts every key the store writes.
	DefaultPrefix = "ratekeeper"
	// DefaultTimeout bounds one store call.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultReplayTTL is how long a take's replay record lives unless
	// Timeout is longer. The client library re-sends a command only
	// during the call (go-redis stops retrying once the store's deadline
	// has passed), but a re-sent copy may then wait in the socket buffers
	// of a slow or briefly stalled Redis before it runs; the record must
	// still exist when it does. Ten seconds is far beyond the default
	// 50ms Timeout, for the price of one small key per take that writes
	// state (an admitted take, a counted refusal, a block start) held that
	// long: about 10 MB at 10,000 such takes per second.
	DefaultReplayTTL = 10 * time.Second
)

// Options configures a [Store]. The zero value selects every default; New
// reads the fields and never writes to them.
type Options struct {
	// Prefix starts every key, followed by ':'. Default [DefaultPrefix].
	// It must not contain '{' or '}', which would change the Redis Cluster
	// hash tag. Use distinct prefixes to keep applications (or tests) that
	// share one Redis apart.
	Prefix string
	// Timeout bounds every Take, Peek and Reset: each returns by the
	// earlier of ctx's deadline and now+Timeout, whatever the client's
	// own timeouts, and even when the client ignores context deadlines
	// (go-redis ContextTimeoutEnabled false, its default) and Redis stops
	// answering. Default [DefaultTimeout]; negative is an error.
	Timeout time.Duration
	// ReplayTTL is how long Redis keeps the reply of a take that wrote
	// state (an admission, a counted refusal, a block start), so that a
	// client library's automatic re-send of the same command returns that
	// reply instead of counting the request (or starting a block) again.
	// Zero means the longer of [DefaultReplayTTL] (see there why) and
	// Timeout. It is rounded up to whole milliseconds and must be at least
	// Timeout. A re-sent copy that reaches Redis more than ReplayTTL after
	// the first one ran counts again.
	//
	// A negative ReplayTTL disables replay records, saving one short-lived
	// key and one write per take that writes state. Do that only with a
	// client that never re-sends commands (go-redis MaxRetries -1 and, for
	// cluster clients, MaxRedirects -1), or one request may be counted
	// several times (and a block escalated twice) when the network or
	// Redis misbehaves.
	ReplayTTL time.Duration
	// ClusterReload is, for a cluster client (one with a ReloadState
	// method, such as *redis.ClusterClient), the shortest interval between
	// topology reloads the store triggers itself after a connection or
	// timeout error. go-redis otherwise reloads only every 60 s or on a
	// MOVED reply, so after a master fails over, calls for its slots keep
	// failing until then; with this, recovery follows the failover within
	// about ClusterReload. Zero means [DefaultClusterReload]; negative
	// disables. Other clients ignore it.
	ClusterReload time.Duration
}

// DefaultClusterReload is the default [Options.ClusterReload].
const DefaultClusterReload = time.Second

// reloader is implemented by cluster clients (*redis.ClusterClient).
type reloader interface {
	ReloadState(ctx context.Context)
}

// Store is a [store.Store] that keeps state in Redis and makes every
// decision with one Lua script, so that all processes sharing the Redis
// share the limits. It works with single nodes, Sentinel and Cluster: every
// key of a decision carries the same hash tag.
//
// A Store is safe for concurrent use and holds no lock around network I/O.
// Scripts run with EVALSHA and fall back to EVAL when the server does not
// have them (after a restart or SCRIPT FLUSH).
type Store struct {
	client    redis.UniversalClient
	prefix    string
	timeout   time.Duration
	replayMS  int64
	scripts   [store.FixedWindow + 1]*redis.Script
	nonceBase string
	seq       atomic.Uint64

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
	switch replay := opts.ReplayTTL; {
	case replay < 0:
		s.replayMS = 0
	case replay == 0:
		s.replayMS = ceilMillis(max(DefaultReplayTTL, s.timeout))
	case replay < s.timeout:
		return nil, fmt.Errorf("redisstore: ReplayTTL %s is shorter than Timeout %s", replay, s.timeout)
	default:
		s.replayMS = ceilMillis(replay)
	}
	for _, alg := range store.Algorithms {
		src, err := lua.Source(alg.String())
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		s.scripts[alg] = redis.NewScript(src)
	}
	if r, ok := client.(reloader); ok && opts.ClusterReload >= 0 {
		s.reloader = r
		s.reloadEvery = opts.ClusterReload
		if s.reloadEvery == 0 {
			s.reloadEvery = DefaultClusterReload
		}
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("redisstore: random nonce seed: %w", err)
	}
	s.nonceBase = base64.RawURLEncoding.EncodeToString(seed[:])
	return s, nil
}

// ceilMillis returns d in whole milliseconds, rounded up.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Take checks req against every limit and records it in all of them only
// if all admit it, in one atomic script that also applies the key's block,
// starts blocks, counts refusals ([store.Request.CountDenied]) and
// de-duplicates ([store.Request.DedupID]) as package store specifies.
// Before any I/O it returns req.Validate's error for an invalid request. It
// returns a *store.BackendError when Redis fails or does not answer within
// the timeout; the request was then recorded (and a block started) once or
// not at all, never twice.
//
// Block times come from the block key's TTL and so have millisecond
// resolution: RetryAfter of a blocked request is the key's PTTL, never
// shorter than the block's true remaining time.
func (s *Store) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.decide(ctx, "take", req)
}

// Peek returns the decision Take would return now without writing
// anything to Redis: an existing block, a remembered de-duplication id, or
// else the limits' verdict. Where Take would start a block, Peek reports
// the refusal without Blocked, since no block exists yet. Errors are as
// for Take.
func (s *Store) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.decide(ctx, "peek", req)
}

// Reset deletes the state of req.Key under req.Limits (for the sliding
// window log, the log of exactly that set of limits) and the key's block,
// strike counter and remembered de-duplication ids, which every limit of
// the key shares. State of the key under other limits is kept, and replay
// records of earlier takes are left to expire. req.Cost is ignored;
// otherwise it returns req.Validate's error for an invalid request, and a
// *store.BackendError when Redis fails or does not answer within the
// timeout.
func (s *Store) Reset(ctx context.Context, req store.Request) error {
	keys, err := s.StateKeys(req)
	if err != nil {
		return err
	}
	keys = appendKeyKeys(keys, keyBase(s.prefix, EncodeKey(req.Key)))
	_, err = s.run(ctx, "reset", func(ctx context.Context) (any, error) {
		return s.client.Del(ctx, keys...).Result()
	})
	return err
}

// StateKeys returns the Redis keys that hold req's per-limit state: one
// per limit in request order, or for the sliding window log the one sorted
// set shared by all limits of the request. The key's block, strike counter
// and de-duplication hash ("<prefix>:{<enc key>}:block", ":strikes",
// ":dedup") and replay records are not included. req.Cost is ignored;
// otherwise it returns req.Validate's error for an invalid request.
func (s *Store) StateKeys(req store.Request) ([]string, error) {
	req.Cost = 0 // not part of the state's identity
	if err := req.Validate(); err != nil {
		return nil, err
	}
	base := keyBase(s.prefix, EncodeKey(req.Key))
	return appendStateKeys(make([]string, 0, len(req.Limits)), base, req.Limits), nil
}

// decide runs the algorithm's script in mode "take" or "peek".
func (s *Store) decide(ctx context.Context, mode string, req store.Request) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	nonce := ""
	if mode == "take" {
		nonce = s.nonce()
	}
	script, keys, args := s.command(mode, req, nonce)
	v, err := s.run(ctx, mode, func(ctx context.Context) (any, error) {
		return script.Run(ctx, s.client, keys, args...).Result()
	})
	if err != nil {
		return store.Decision{}, err
	}
	r, err := decodeReply(v, req.Limits)
	if err != nil {
		return store.Decision{}, backendError(mode, err)
	}
	return r.decision(req.Limits), nil
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

// command returns the script, KEYS and ARGV of a validated request in mode
// "take" (with the attempt's nonce) or "peek" (nonce unused); see package
// lua for the layout. Keys the script will not touch (the replay record of
// a peek, the strike counter when no limit escalates, the de-duplication
// hash without an id) are filled with the block key, which is in the slot.
func (s *Store) command(mode string, req store.Request, nonce string) (*redis.Script, []string, []any) {
	base := keyBase(s.prefix, EncodeKey(req.Key))
	blockKey := base + tagBlock
	keys := make([]string, 4, 4+len(req.Limits))
	keys[0], keys[1], keys[2], keys[3] = blockKey, blockKey, blockKey, blockKey
	if mode == "take" {
		keys[0] = base + tagOp + ":" + nonce
	}
	if escalates(req.Limits) {
		keys[2] = base + tagStrikes
	}
	var dedup any = ""
	if req.DedupID != "" {
		keys[3] = base + tagDedup
		dedup = dedupField(req.DedupID)
	}
	keys = appendStateKeys(keys, base, req.Limits)
	var countDenied any = "0"
	if req.CountDenied {
		countDenied = "1"
	}
	args := make([]any, 0, 7+6*len(req.Limits))
	args = append(args, mode, req.EffectiveCost(), nonce, s.replayMS, countDenied, dedup, len(req.Limits))
	for _, l := range req.Limits {
		args = append(args, l.Rate, l.Period.Microseconds(), l.Capacity())
		if l.Block > 0 {
			args = append(args, l.Block.Milliseconds(), l.BlockMax.Milliseconds(), l.ID())
		} else {
			args = append(args, 0, 0, "")
		}
	}
	return s.scripts[req.Limits[0].Algorithm], keys, args
}

// nonce returns an identifier unique to one take attempt: a random
// per-store part and a counter.
func (s *Store) nonce() string {
	var b [11 + 13]byte
	n := copy(b[:], s.nonceBase)
	return string(strconv.AppendUint(b[:n], s.seq.Add(1), 36))
}

// result carries a command's outcome out of its goroutine.
type result struct {
	v   any
	err error
}

// run calls fn with a context bounded by the store's timeout and returns
// by that deadline even if fn does not: fn runs in its own goroutine, which
// a client that ignores context deadlines may keep busy (until its own read
// timeout) after run has returned. A panic in fn becomes an error. Errors
// are *store.BackendError.
func (s *Store) run(ctx context.Context, op string, fn func(context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, backendError(op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		defer func() {
			// A panic in the client (or a hook the application added) must
			// not take the process down with the request.
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("redisstore: client panicked: %v", p)}
			}
		}()
		v, err := fn(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, s.failed(op, r.err)
		}
		return r.v, nil
	case <-ctx.Done():
		return nil, s.failed(op, ctx.Err())
	}
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
