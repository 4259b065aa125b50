package limiter

import (
	"errors"
	"reflect"
	"runtime"
	"sync"
	"weak"

	"github.com/ratekeeper/ratekeeper/store"
)

// errUnnamedShared refuses a second limiter without a name on a store that
// already serves one: both would be named "default" and share one quota
// without anyone asking for it.
var errUnnamedShared = errors.New("ratekeeper: limiter: another limiter without a name uses this store; " +
	"give each limiter on one store its own name (Options.Name), or the same name to share a quota on purpose")

// unnamed remembers, per store, the limiter without a name that uses it.
// A store is found by its address and the limiter is held weakly, so
// neither is kept alive by the registry: while the limiter lives it holds
// the store, so the address cannot be reused by another store; once it is
// collected its entry is stale and replaced.
var unnamed struct {
	mu     sync.Mutex
	owners map[uintptr]weak.Pointer[Limiter]
}

// claimUnnamed records l as the limiter without a name on each of stores
// (its store and fallback store), or returns errUnnamedShared when a live
// limiter without a name already uses one of them. A limiter that is no
// longer referenced but not yet collected does not count: a conflict runs
// a collection before it is reported. Stores that are not pointers (no
// store of this module) are not tracked.
func claimUnnamed(l *Limiter, stores ...store.Store) error {
	unnamed.mu.Lock()
	defer unnamed.mu.Unlock()
	if unnamed.owners == nil {
		unnamed.owners = make(map[uintptr]weak.Pointer[Limiter])
	}
	var addrs []uintptr
	for _, s := range stores {
		if a := storeAddr(s); a != 0 {
			addrs = append(addrs, a)
		}
	}
	if unnamedTaken(addrs) {
		runtime.GC() // forget limiters nobody references any more
		if unnamedTaken(addrs) {
			return errUnnamedShared
		}
	}
	for a, w := range unnamed.owners {
		if w.Value() == nil {
			delete(unnamed.owners, a)
		}
	}
	for _, a := range addrs {
		unnamed.owners[a] = weak.Make(l)
	}
	return nil
}

// unnamedTaken reports whether a live limiter without a name uses one of
// the stores at addrs. The caller holds unnamed.mu.
func unnamedTaken(addrs []uintptr) bool {
	for _, a := range addrs {
		if w, ok := unnamed.owners[a]; ok && w.Value() != nil {
			return true
		}
	}
	return false
}

// storeAddr returns the address of the store s points to, or 0 when s is
// nil or not a pointer.
func storeAddr(s store.Store) uintptr {
	if s == nil {
		return 0
	}
	v := reflect.ValueOf(s)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	return v.Pointer()
}
