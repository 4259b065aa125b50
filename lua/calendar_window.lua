-- calendar_window.lua: precedes fixed_window.lua in the calendar script,
-- in place of window.lua. window returns the start and end (µs) of limit
-- i's window that holds the time t: for a calendar limit the one of its
-- four windows (calendar.lua) that holds t, else a multiple of the period.
-- A server time outside the four windows (a clock more than a window away
-- from the store's) is an error.
local function window(i, t)
  local b = bounds[i]
  if not b then
    local ws = t - math.fmod(t, period[i])
    return ws, ws + period[i]
  end
  if t < b[1] or t >= b[4] then
    error('ratekeeper: calendar windows do not hold the server time')
  end
  if t < b[2] then
    return b[1], b[2]
  elseif t < b[3] then
    return b[2], b[3]
  end
  return b[3], b[4]
end

-- window_period is window.lua's: 0 for a calendar limit, whose windows do
-- not start at multiples of a period, so that the lean script of one limit
-- sets its own TTL on such a key.
local function window_period(i)
  if bounds[i] then
    return 0
  end
  return period[i]
end
