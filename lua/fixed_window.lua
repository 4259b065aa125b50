-- fixed_window.lua: state[i] is a hash {w, cur} for limit i: the start w
-- of the window (microseconds, a multiple of the period) and the units cur
-- counted in it. Window algorithms count up to the capacity, the
-- rate.
local start, cur = {}, {}
for i = 1, n do
  local p, r = period[i], cap[i]
  local ws = now - math.fmod(now, p)
  local c = 0
  local st = redis.call('HMGET', state[i], 'w', 'cur')
  if st[1] then
    local w = tonumber(st[1])
    if w and w >= ws then
      -- w > ws only when the server clock went back (after a failover):
      -- keep the newer window rather than forget its count.
      ws = w
      c = tonumber(st[2])
      if not c then
        error('ratekeeper: malformed fixed window state')
      end
    end
  end
  local left = ws + p - now
  start[i], cur[i] = ws, c + cost
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

-- record adds the request to every limit's window: an admitted request,
-- or a refused one whose attempts count.
local function record()
  for i = 1, n do
    redis.call('HSET', state[i], 'w', int(start[i]), 'cur', int(cur[i]))
    redis.call('PEXPIRE', state[i], int(ttl_ms(start[i] + period[i] - now)))
  end
end

return finish(record)
