-- fixed_window.lua: state[i] is a hash {w, cur, p} for limit i: the start w
-- of the window (microseconds, from window: a multiple of the period, or a
-- calendar window's start), the units cur counted in it, and the period p
-- the key's TTL was set for (window_period; see doc.go). Window algorithms
-- count up to the capacity, the rate.
local start, stop, cur = {}, {}, {}
for i = 1, n do
  local r = cap[i]
  local ws, we = window(i, now)
  local c = 0
  local st = redis.pcall('HMGET', state[i], 'w', 'cur')
  local w, sc
  if st[1] then
    w, sc = tonumber(st[1]), tonumber(st[2])
  end
  if st.err or (st[1] and not (w and w >= 0 and w <= 9007199254740992
      and sc and sc >= 0 and sc <= 9007199254740992)) then
    -- Unreadable state (another type, or not a window and a count) is
    -- repaired: the limit is decided as fresh.
    repair(state[i])
  elseif w and w >= ws then
    -- w > ws only when the server clock went back (after a failover):
    -- keep the newer window rather than forget its count.
    ws, c = w, sc
    we = select(2, window(i, ws))
  end
  local left = we - now
  start[i], stop[i], cur[i] = ws, we, c + cost
  rem0[i] = floor_units(r - c, r)
  reset0[i] = 0
  if c > 0 then
    reset0[i] = left
  end
  if c + cost <= r then
    ok[i] = true
    rem1[i] = r - c - cost
    reset1[i] = left
    retry[i] = 0
  else
    ok[i] = false
    allowed = false
    retry[i] = left
  end
end

-- settle gives a state key left without TTL the one its window calls for.
local function settle()
  for i = 1, n do
    expire(state[i], stop[i] - now)
  end
end

-- record adds the request to every limit's window: an admitted request,
-- or a refused one whose attempts count.
local function record()
  for i = 1, n do
    redis.call('HSET', state[i], 'w', int(start[i]), 'cur', int(cur[i]), 'p', int(window_period(i)))
    redis.call('PEXPIRE', state[i], int(ttl_ms(stop[i] - now)))
  end
end

return finish(record, settle)
