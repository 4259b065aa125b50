package lua

import (
	_ "embed" // the scripts are embedded at build time
	"errors"
	"fmt"
)

//go:embed prelude.lua
var prelude string

//go:embed gcra.lua
var gcra string

//go:embed token_bucket.lua
var tokenBucket string

//go:embed sliding_window_log.lua
var slidingWindowLog string

//go:embed sliding_window_counter.lua
var slidingWindowCounter string

//go:embed fixed_window.lua
var fixedWindow string

// names lists the algorithms in the order of the store package's
// Algorithm constants.
var names = [...]string{
	"gcra",
	"token_bucket",
	"sliding_window_log",
	"sliding_window_counter",
	"fixed_window",
}

// bodies holds each algorithm file, indexed like names.
var bodies = [...]*string{&gcra, &tokenBucket, &slidingWindowLog, &slidingWindowCounter, &fixedWindow}

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
// "token_bucket"): the common prelude followed by the algorithm. It returns
// an error wrapping [ErrUnknownScript] when name is not one of [Names].
//
// The result is the exact text to pass to EVAL or SCRIPT LOAD; its SHA-1
// is stable for a given build. Source is safe for concurrent use.
func Source(name string) (string, error) {
	for i, n := range names {
		if n == name {
			return prelude + "\n" + *bodies[i], nil
		}
	}
	return "", fmt.Errorf("%w %q", ErrUnknownScript, name)
}
