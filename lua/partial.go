package lua

import "strings"

// partial is the partial-grant script of an algorithm file: its full
// script as the function decide, then partial.lua, which calls it twice
// (package documentation, "Partial grants").
func partial(body string) []string {
	return []string{"local function decide()", strings.Join(full(body), "\n"), "end", partialDriver}
}
