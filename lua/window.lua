-- window.lua: precedes fixed_window.lua in its scripts. window returns the
-- start and end (µs) of limit i's window that holds the time t: windows
-- are aligned at multiples of the period.
local function window(i, t)
  local ws = t - math.fmod(t, period[i])
  return ws, ws + period[i]
end
