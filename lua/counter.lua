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

-- counter_wait returns the time (µs, at least 1) until a request of cost
-- fits under limit, for stored state {w, sc, spv} that shows the window ws
-- with counts c and pv now, if nothing else is recorded: a first guess
-- inside this window when the weight of the previous one can fall far
-- enough, else inside the next one, where the current window has become
-- the previous one; then made exact by earliest.
local function counter_wait(ws, p, c, pv, w, sc, spv, limit)
  local at
  local avail = limit - cost - c
  if avail >= 0 and pv > 0 then
    at = ws + ceil_us(p - avail * p / pv)
  elseif c > 0 then
    at = ws + p + ceil_us(p - (limit - cost) * p / c)
  else
    at = ws + p
  end
  return earliest(at - now, function(d)
    local t = now + d
    local ws2, c2, pv2 = counter_at(t, p, w, sc, spv)
    return estimate(t, ws2, p, c2, pv2) + cost <= limit
  end)
end
