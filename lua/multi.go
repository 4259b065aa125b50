package lua

import (
	_ "embed" // the scripts are embedded at build time
	"strconv"
	"strings"
	"sync"
)

//go:embed part.lua
var part string

//go:embed multi.lua
var multi string

//go:embed refund.lua
var refund string

//go:embed lean_multi.lua
var leanMulti string

// stacked builds the stacked script once: common.lua, one function per
// algorithm file (unreadable.lua, prelude.lua, part.lua and the file, with
// KEYS and ARGV as parameters so that each part sees its own), the table
// that maps algorithm indexes to them, then multi.lua.
var stacked = sync.OnceValue(func() string {
	var b strings.Builder
	b.WriteString(common)
	b.WriteString("\n" + override)
	b.WriteString("\nlocal parts = {}\n")
	fn := make(map[*string]string, len(bodies))
	for i, body := range bodies {
		if body == &suppressed {
			continue // not stacked: store.MultiStore refuses it
		}
		name, ok := fn[body]
		if !ok {
			name = "part_" + names[i]
			fn[body] = name
			b.WriteString("local function " + name + "(KEYS, ARGV)\n")
			b.WriteString(unreadable + "\n" + prelude + "\n" + part + "\n" + algorithmBody(i))
			b.WriteString("\nend\n")
		}
		b.WriteString("parts[" + strconv.Itoa(i) + "] = " + name + "\n")
	}
	b.WriteString(multi)
	return b.String()
})

// Stacked returns the script that decides several requests, each with its
// own key, limits and algorithm, as one: see "Stacked decisions" in the
// package documentation. The result is stable for a given build; Stacked
// is safe for concurrent use.
func Stacked() string { return stacked() }

// StackedLean returns the stacked script for steps whose every part is a
// plain GCRA or token bucket request (one limit, no block, counted
// refusals, de-duplication id or override): the same decisions and reply as
// [Stacked], with lean arguments (see "Stacked decisions" in the package
// documentation) and a fraction of its Redis CPU. The result is stable for
// a given build; StackedLean is safe for concurrent use.
func StackedLean() string { return common + "\n" + unreadable + "\n" + leanMulti }

// Refund returns the script that gives back the units one part of a
// stacked take recorded, at most once: see "Stacked decisions".
func Refund() string { return common + "\n" + refund }
