package lua

import _ "embed" // the driver is embedded at build time

//go:embed reserve.lua
var reserveDriver string

// reserve is the reservation script of an algorithm file: common.lua,
// then the rest of its full script as the function decide, then
// reserve.lua, which answers the full reply and the time of the decision
// (package documentation, "Reservations").
func reserve(body string) []string {
	return []string{common, "local function decide()", unreadable, override, prelude, body, "end", reserveDriver}
}
