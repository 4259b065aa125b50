-- sliding_window_counter.lua: state[i] is a hash {w, cur, prev, p} for limit
-- i: the start w of the window that cur counts (microseconds, a multiple of
-- the period), the count prev of the window before it, and the period p the
-- key's TTL was set for (see doc.go). Window algorithms count up to the
-- capacity, the rate. counter.lua precedes this file.

local start, cur, prev = {}, {}, {}
for i = 1, n do
  local p, r = period[i], cap[i]
  local w, sc, spv
  local st = redis.pcall('HMGET', state[i], 'w', 'cur', 'prev')
  if st[1] then
    w, sc, spv = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
  end
  if st.err or (st[1] and not (w and w >= 0 and w <= 9007199254740992
      and sc and sc >= 0 and sc <= 9007199254740992
      and spv and spv >= 0 and spv <= 9007199254740992)) then
    -- Unreadable state (another type, or not a window and two counts) is
    -- repaired: the limit is decided as fresh.
    repair(state[i])
    w, sc, spv = nil, nil, nil
  end
  local ws, c, pv = counter_at(now, p, w, sc, spv)
  local est = estimate(now, ws, p, c, pv)
  start[i], cur[i], prev[i] = ws, c + cost, pv
  rem0[i] = floor_units(r - est, r)
  if c > 0 then
    reset0[i] = ws + 2 * p - now
  elseif pv > 0 then
    reset0[i] = ws + p - now
  else
    reset0[i] = 0
  end
  -- One unit more fits once est + rem + 1 <= r: the wait of this cost
  -- under r - rem - 1 + cost.
  next0[i] = 0
  if rem0[i] < r then
    next0[i] = counter_wait(ws, p, c, pv, w, sc, spv, r - rem0[i] - 1 + cost)
  end
  if est + cost <= r then
    ok[i] = true
    rem1[i] = floor_units(r - (est + cost), r)
    reset1[i] = ws + 2 * p - now
    next1[i] = 0
    if rem1[i] < r then
      next1[i] = counter_wait(ws, p, c + cost, pv, ws, c + cost, pv, r - rem1[i] - 1 + cost)
    end
    retry[i] = 0
  else
    ok[i] = false
    allowed = false
    retry[i] = counter_wait(ws, p, c, pv, w, sc, spv, r)
  end
end

-- settle gives a state key left without TTL the one its windows call
-- for: the end of the window after the current one.
local function settle()
  for i = 1, n do
    expire(state[i], start[i] + 2 * period[i] - now)
  end
end

-- record adds the request to every limit's current window: an admitted
-- request, or a refused one whose attempts count. The state matters until
-- the end of the window after it.
local function record()
  for i = 1, n do
    redis.call('HSET', state[i], 'w', int(start[i]), 'cur', int(cur[i]),
      'prev', int(prev[i]), 'p', int(period[i]))
    redis.call('PEXPIRE', state[i], int(ttl_ms(start[i] + 2 * period[i] - now)))
  end
end

return finish(record, settle)
