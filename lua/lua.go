package lua

import (
	_ "embed" // the scripts are embedded at build time
	"errors"
	"fmt"
)

//go:embed common.lua
var common string

//go:embed prelude.lua
var prelude string

//go:embed unreadable.lua
var unreadable string

//go:embed override.lua
var override string

//go:embed lean.lua
var leanPrelude string

//go:embed lean_override.lua
var leanOverride string

//go:embed bucket.lua
var bucket string

//go:embed lean_bucket.lua
var leanBucket string

//go:embed sliding_window_log.lua
var slidingWindowLog string

//go:embed sliding_window_counter.lua
var slidingWindowCounter string

//go:embed fixed_window.lua
var fixedWindow string

//go:embed counter.lua
var counter string

//go:embed suppressed.lua
var suppressed string

// names lists the algorithms in the order of the store package's
// Algorithm constants.
var names = [...]string{
	"gcra",
	"token_bucket",
	"sliding_window_log",
	"sliding_window_counter",
	"fixed_window",
	"suppressed",
}

// bodies holds each algorithm's file, indexed like names. GCRA and the
// token bucket are one algorithm and share one file.
var bodies = [...]*string{&bucket, &bucket, &slidingWindowLog, &slidingWindowCounter, &fixedWindow, &suppressed}

// ErrUnknownScript is returned by [Source] for a name that is not in
// [Names].
var ErrUnknownScript = errors.New("lua: unknown script")

// Names returns the algorithm names that [Source] accepts, in the order of
// the store package's Algorithm constants. The slice is a fresh copy.
func Names() []string {
	out := make([]string, len(names))
	copy(out, names[:])
	return out
}

// Source returns the complete script for the algorithm name (for example
// "token_bucket"): common.lua, then the lean prelude (lean true: one limit,
// no block, de-duplication or counted refusals) or the full one, then the
// algorithm (after counter.lua for sliding_window_counter and
// suppressed). The lean GCRA and token bucket script is common.lua and
// lean_bucket.lua, the same arithmetic written with scalars. The
// suppressed strategy has no lean script: both values of lean give its
// full one. It returns an error wrapping [ErrUnknownScript] when name is
// not one of [Names].
//
// The result is the exact text to pass to EVAL or SCRIPT LOAD; its SHA-1
// is stable for a given build. Source is safe for concurrent use.
func Source(name string, lean bool) (string, error) {
	p := prelude
	if lean {
		p = leanPrelude
	}
	for i, n := range names {
		if n != name {
			continue
		}
		if lean && bodies[i] == &bucket {
			// The default algorithm's lean script is written out with
			// scalars: no per-limit tables, no closures on admission.
			return common + "\n" + leanBucket, nil
		}
		if bodies[i] == &suppressed {
			p = prelude
		}
		if p == prelude {
			p = override + "\n" + prelude
		}
		return common + "\n" + unreadable + "\n" + p + "\n" + algorithmBody(i), nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownScript, name)
}

// SourceWithOverrides returns the lean script of a request that applies
// its key's override (store.Request.Overrides) for the algorithm name:
// common.lua, unreadable.lua, override.lua and lean_override.lua, then the
// algorithm's lean script as the body of a function (for GCRA and the
// token bucket lean_bucket.lua; for the others lean.lua and the algorithm
// file), with the lean calling convention and the override key as
// KEYS[2]. The suppressed strategy has none (its requests use the full
// script): for it, and for names not in [Names], it returns an error
// wrapping [ErrUnknownScript]. See "Calling convention: lean scripts with
// overrides" in the package documentation. SourceWithOverrides is safe for
// concurrent use.
func SourceWithOverrides(name string) (string, error) {
	for i, n := range names {
		if n != name || bodies[i] == &suppressed {
			continue
		}
		body := leanBucket
		if bodies[i] != &bucket {
			body = leanPrelude + "\n" + algorithmBody(i)
		}
		return common + "\n" + unreadable + "\n" + override + "\n" + leanOverride +
			"\nlocal function decide()\n" + body + "\nend\n" + leanOverrideReply, nil
	}
	return "", fmt.Errorf("%w %q: no lean script with overrides", ErrUnknownScript, name)
}

// leanOverrideReply ends the lean script with overrides: lean_bucket.lua's
// reply, marked repaired when the override was, and the override's code
// and value.
const leanOverrideReply = `local reply = decide()
if type(reply) == 'table' and reply[1] then
  if repaired == 1 then
    reply[5] = 1
  end
  reply[6] = override_kind
  reply[7] = override_value
end
return reply
`

// algorithmBody returns the algorithm file of names[i], after counter.lua
// for the algorithms that count in windows with it (sliding_window_counter
// and suppressed).
func algorithmBody(i int) string {
	switch bodies[i] {
	case &suppressed, &slidingWindowCounter:
		return counter + "\n" + *bodies[i]
	}
	return *bodies[i]
}
