-- window.lua: precedes fixed_window.lua in its scripts. window returns the
-- start and end (µs) of limit i's window that holds the time t: windows
-- are aligned at multiples of the period.
local function window(i, t)
  local ws = t - math.fmod(t, period[i])
  return ws, ws + period[i]
end

-- window_period returns what a write of limit i's state stores as its
-- field p: the period at whose multiples its windows start. With it the
-- lean script of one limit (lean_fixed_window.lua) knows that a key of its
-- window already has the TTL its take would set.
local function window_period(i)
  return period[i]
end
