package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// scriptStore is the [store.Store] that [WithScript] returns.
type scriptStore struct {
	s       *redisStore
	name    string
	sc      script
	options []any
}

var _ store.Store = (*scriptStore)(nil)

// WithScript returns a [store.Store] that decides with a limiter written
// in Lua by the application, the script source, run under the contract of
// package [github.com/ratekeeper/ratekeeper/lua] ("User scripts"): the
// store builds the key and passes the request's limit, the script answers
// allow or refuse with the values the headers and the 429 body need. It
// runs on s's Redis (s must come from [New]): the same client, prefix,
// batching and budget. It decides requests with one limit and without
// Block, CountDenied, DedupID or Overrides; other requests are refused
// with an error wrapping [store.ErrInvalidRequest]. Its refusals are not
// cached (a script may free capacity on its own, as a concurrency cap does
// when a request ends). It is safe for concurrent use; [Call] runs the
// script's other modes.
//
// The script is called name. The name identifies the script in its keys, its errors and
// [store.Decision.LimitID]: 1 to 64 bytes of [A-Za-z0-9_.-]. options are
// passed to the script after the built-in arguments, as ARGV[6],
// ARGV[7], ... WithScript returns an error for an invalid name or an
// empty source; the script is sent to Redis on first use, and a syntax
// error then fails every call with a script error naming it.
//
// Redis runs one script at a time, so a user script that runs long stops
// every limiter on its Redis, not only its own. A call that gets no reply
// within the budget fails as a timeout (counted by its own limiter's
// breaker), and the store then sends SCRIPT KILL to the script's node,
// which Redis carries out once the script has run for its
// busy-reply-threshold, and only if it has not written; other calls meet
// BUSY meanwhile and fail, if at all, as kind "busy", which the
// middleware's breakers do not count. Set busy-reply-threshold below the
// store's Timeout (docs/failure-modes.md, "User scripts"). A script that
// writes keys it was not given can change any state on its Redis.
func WithScript(s store.Store, name, source string, options ...string) (store.Store, error) {
	rs, ok := s.(*redisStore)
	if !ok {
		return nil, fmt.Errorf("redisstore: script %q: the store is a %T, not one from redisstore.New", name, s)
	}
	if err := validScriptName(name); err != nil {
		return nil, err
	}
	if source == "" {
		return nil, fmt.Errorf("redisstore: script %q: empty source", name)
	}
	u := &scriptStore{s: rs, name: name, sc: newScript(source)}
	for _, o := range options {
		u.options = append(u.options, o)
	}
	return u, nil
}

func validScriptName(n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("redisstore: script name must be 1 to 64 bytes, got %q", n)
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Errorf("redisstore: script name %q: only [A-Za-z0-9_.-] allowed", n)
		}
	}
	return nil
}

// Take runs the script in mode "take".
func (u *scriptStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	d, _, err := u.call(ctx, modeTake, req)
	return d, err
}

// Peek runs the script in mode "peek"; the contract says a script writes
// nothing then.
func (u *scriptStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	d, _, err := u.call(ctx, modePeek, req)
	return d, err
}

// Reset deletes the request's state key. It returns an error wrapping
// [store.ErrNotFound] when there was none.
func (u *scriptStore) Reset(ctx context.Context, req store.Request) error {
	req.Cost = 0
	if err := u.check(&req); err != nil {
		return err
	}
	key := u.key(&req)
	v, err := u.s.do(ctx, "reset", &command{key: key, args: []any{"del", key}})
	if err != nil {
		return u.wrap(err)
	}
	if n, ok := v.(int64); ok && n == 0 {
		return fmt.Errorf("redisstore: script %q: reset %q: %w", u.name, req.Key, store.ErrNotFound)
	}
	return nil
}

// Call runs the script of s, a store from [WithScript], in mode (ARGV[1]):
// "take" and "peek" as the store interface uses them, or any other mode
// the script understands, such as "release" for a concurrency cap. It
// returns the decision and the reply's optional extras (elements after the
// fourth, as go-redis decodes them). A Lua error, a malformed reply or no
// reply within the budget is a *store.BackendError that names the script;
// a store not from WithScript is an error wrapping
// [store.ErrInvalidRequest].
func Call(ctx context.Context, s store.Store, mode string, req store.Request) (store.Decision, []any, error) {
	u, ok := s.(*scriptStore)
	if !ok {
		return store.Decision{}, nil, fmt.Errorf("%w: redisstore.Call: the store is a %T, not one from WithScript", store.ErrInvalidRequest, s)
	}
	return u.call(ctx, mode, req)
}

// call is [Call] on u.
func (u *scriptStore) call(ctx context.Context, mode string, req store.Request) (store.Decision, []any, error) {
	if mode == "" {
		return store.Decision{}, nil, fmt.Errorf("%w: script %q: empty mode", store.ErrInvalidRequest, u.name)
	}
	if err := u.check(&req); err != nil {
		return store.Decision{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return store.Decision{}, nil, backendError(mode, err)
	}
	li := u.s.limits.get(req.Limits[0])
	key := u.key(&req)
	args := make([]any, 0, 9+len(u.options))
	args = append(args, "evalsha", u.sc.sha, 1, key, mode, contract.Cost(&req), li.rate, li.period, li.capacity)
	args = append(args, u.options...)
	v, err := u.s.do(ctx, mode, &command{key: key, sc: &u.sc, args: args})
	if err != nil {
		if errors.Is(err, errBusyBudget) {
			// The node answered BUSY to other calls while this one
			// waited: most likely this script is the one running.
			err = u.s.failed(mode, errBudget)
		}
		if store.KindOf(err) == "timeout" {
			u.s.stopScript(key)
		}
		return store.Decision{}, nil, u.wrap(err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 4 {
		return store.Decision{}, nil, u.wrap(backendError(mode, fmt.Errorf("%w: got %T %v, want at least 4 elements", errBadReply, v, v)))
	}
	d, err := decodeLean(arr[:4], li)
	if err != nil {
		return store.Decision{}, nil, u.wrap(backendError(mode, err))
	}
	d.LimitID = u.name
	// A user script does not say when its next unit comes: the time until
	// it is full is the moment it has surely come.
	d.NextAfter = 0
	if d.Remaining < d.Capacity {
		d.NextAfter = d.ResetAfter
	}
	return d, arr[4:], nil
}

// check validates req and refuses what the contract does not cover.
func (u *scriptStore) check(req *store.Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if !contract.Plain(req) || req.ApplyOverride {
		return fmt.Errorf("%w: script %q decides one limit without Block, CountDenied, DedupID or Overrides", store.ErrInvalidRequest, u.name)
	}
	return nil
}

// key returns the request's state key: the store's prefix and hash tag,
// "u", the script's name and the limit's part.
func (u *scriptStore) key(req *store.Request) string {
	return u.s.prefix + ":{" + encodeKey(req.Key) + "}:u:" + u.name + ":" + limitKey(req.Limits[0])
}

// wrap names the script in a backend error.
func (u *scriptStore) wrap(err error) error {
	var be *store.BackendError
	if errors.As(err, &be) {
		return &store.BackendError{Op: be.Op, Kind: be.Kind, Err: fmt.Errorf("script %q: %w", u.name, be.Err)}
	}
	return err
}

// Name returns "redis", the backend name used in metrics labels.
func (u *scriptStore) Name() string { return "redis" }

// scriptKillWait bounds a SCRIPT KILL: Redis reads it only once the
// script has run for busy-reply-threshold (5 s by default).
const scriptKillWait = 10 * time.Second

// stopScript asks the node that serves key to kill the script it runs
// (SCRIPT KILL), after a user script's call got no reply within its
// budget: nobody waits for that script's answer any more, and while it
// runs the node decides nothing for anyone. Redis carries the kill out
// once the script has run for busy-reply-threshold and only if it has not
// written; a script that has written runs to its end. One kill is under
// way at a time, in the background. When the script has already ended,
// Redis answers NOTBUSY and nothing happens; a script of another
// application that runs past the threshold at that moment is killed as
// well, as SCRIPT KILL does not name the script it kills.
func (s *redisStore) stopScript(key string) {
	if !s.killing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.killing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), scriptKillWait)
		defer cancel()
		var c redis.Cmdable = s.client
		if cc := s.pipes.cluster; cc != nil {
			node, err := cc.MasterForKey(ctx, key)
			if err != nil {
				return
			}
			c = node
		}
		_ = c.ScriptKill(ctx).Err()
	}()
}
