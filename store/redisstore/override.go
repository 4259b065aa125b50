package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// overrideKey returns the Redis key of key's override:
// "<prefix>:{<encoded key>}:o", in the slot of the key's state.
func (s *redisStore) overrideKey(key string) string {
	return keyBase(s.prefix, encodeKey(key)) + tagOverride
}

// readOverride answers the override's value and PTTL in one atomic step;
// a key of another type answers false instead of its value.
const readOverride = `local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then
  v = false
end
return {v, redis.call('PTTL', KEYS[1])}`

// SetOverride implements [store.OverrideStore]: it stores o for key (one
// string "<prefix>:{<encoded key>}:o" with o.TTL as its PTTL), replacing
// any override the key has. Scripts read it for requests with
// [store.Request.ApplyOverride]. It returns o.Validate's error for an invalid
// override or an empty key, and a *store.BackendError when Redis fails.
func (s *redisStore) SetOverride(ctx context.Context, key string, o store.Override) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidRequest)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	k := s.overrideKey(key)
	v, err := s.do(ctx, "override", &command{key: k, args: []any{"set", k, contract.EncodeOverride(o), "px", o.TTL.Milliseconds()}})
	if err != nil {
		return err
	}
	if v != "OK" {
		return backendError("override", fmt.Errorf("%w: SET answered %v", errBadReply, v))
	}
	return nil
}

// GetOverride implements [store.OverrideStore]. An override that cannot be
// read (another type, a malformed value or no TTL; never written by this
// package) is reported as none, as the scripts treat it.
func (s *redisStore) GetOverride(ctx context.Context, key string) (store.Override, error) {
	if key == "" {
		return store.Override{}, fmt.Errorf("%w: empty key", store.ErrInvalidRequest)
	}
	k := s.overrideKey(key)
	v, err := s.do(ctx, "override", &command{key: k, args: []any{"eval", readOverride, 1, k}})
	if err != nil {
		return store.Override{}, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return store.Override{}, backendError("override", fmt.Errorf("%w: got %T %v", errBadReply, v, v))
	}
	pttl, ok := arr[1].(int64)
	if !ok {
		return store.Override{}, backendError("override", fmt.Errorf("%w: PTTL is %T", errBadReply, arr[1]))
	}
	str, _ := arr[0].(string)
	o, derr := contract.DecodeOverride(str)
	if pttl <= 0 || derr != nil {
		return store.Override{}, fmt.Errorf("redisstore: override of %q: %w", key, store.ErrNotFound)
	}
	o.TTL = time.Duration(pttl) * time.Millisecond
	return o, nil
}

// ClearOverride implements [store.OverrideStore]: it deletes key's override.
func (s *redisStore) ClearOverride(ctx context.Context, key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidRequest)
	}
	k := s.overrideKey(key)
	sc := clearOverrideScript()
	v, err := s.do(ctx, "override", &command{key: k, sc: sc, args: []any{"evalsha", sc.sha, 1, k, placeholder}})
	if err != nil {
		return err
	}
	if n, ok := v.(int64); !ok {
		return backendError("override", fmt.Errorf("%w: clearing answered %T", errBadReply, v))
	} else if n == 0 {
		return fmt.Errorf("redisstore: override of %q: %w", key, store.ErrNotFound)
	}
	return nil
}

// clearOverrideScript deletes an override key and answers how many
// overrides it deleted: 0 for a migration placeholder (see package lua,
// "Slot migration"), which is no override.
var clearOverrideScript = sync.OnceValue(func() *script {
	const src = `local v = redis.pcall('GET', KEYS[1])
local n = redis.call('DEL', KEYS[1])
if v == ARGV[1] then
  return 0
end
return n`
	sc := newScript(src)
	return &sc
})

var _ store.OverrideStore = (*redisStore)(nil)
