-- counter.lua: the windows of the sliding window counter, shared by
-- sliding_window_counter.lua and suppressed.lua, which it precedes.

-- counter_at returns the window containing t and the counts of that window
-- and the one before it, as stored state {w, c, pv} (w nil when absent)
-- shows them at t. A stored window later than t's (the server clock went
-- back, after a failover) stays current: the estimate grows, never shrinks.
local function counter_at(t, p, w, c, pv)
  local ws = t - math.fmod(t, p)
  if not w then
    return ws, 0, 0
  end
  if w == ws then
    return ws, c, pv
  end
  if w == ws - p then
    return ws, 0, c
  end
  if w > ws then
    return w, c, pv
  end
  return ws, 0, 0
end

-- estimate returns prev * (P - e) / P + cur, e = t - ws being the time
-- elapsed in the current window.
local function estimate(t, ws, p, c, pv)
  return pv * (ws + p - t) / p + c
end
