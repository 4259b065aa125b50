package lua

// calendar is the calendar script: the fixed window's full script with
// calendar.lua, which takes the windows' bounds off the arguments, before
// the prelude, and calendar_window.lua in place of window.lua (package
// documentation, "Calendar quotas").
func calendar() []string {
	return []string{common, calendarArgs, unreadable, override, prelude, calendarWindow, fixedWindowFile}
}
