-- suppressed.lua: the suppressed strategy (package store/suppressed),
-- after the full prelude and counter.lua. state[i] is a hash for limit i:
-- {w, cur, prev} as in sliding_window_counter.lua for the accepted units,
-- {ocur, oprev} for the offered units (accepted or not) of the same two
-- windows, and {f, ft}, the suppression factor in parts per million and
-- the time it was computed. The soft limit is the rate, the hard limit the
-- capacity. ARGV[3] carries the request's random value in [0, 1), drawn
-- by the client: the script has no randomness of its own.
if count_denied then
  error('ratekeeper: counting refused requests needs a window algorithm')
end
local draw = tonumber(nonce)
if not draw or not (draw >= 0 and draw < 1) then
  error('ratekeeper: malformed random value')
end

-- valid_count reports whether x is a whole-number-sized count or time.
local function valid_count(x)
  return x and x >= 0 and x <= 9007199254740992
end

local start, cur0, prev0, ocur0, oprev0, f1, ft1 = {}, {}, {}, {}, {}, {}, {}
local factor, drawn = {}, {}
for i = 1, n do
  local p, hard, soft = period[i], cap[i], rate[i]
  local w, sc, spv, soc, sopv, sf, sft
  local st = redis.pcall('HMGET', state[i], 'w', 'cur', 'prev', 'ocur', 'oprev', 'f', 'ft')
  if st[1] then
    w, sc, spv = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
    soc, sopv = tonumber(st[4]), tonumber(st[5])
    sf, sft = tonumber(st[6]), tonumber(st[7])
  end
  if st.err or (st[1] and not (valid_count(w) and valid_count(sc)
      and valid_count(spv) and valid_count(soc) and valid_count(sopv)
      and valid_count(sft) and sf and sf >= 0 and sf <= 1000000)) then
    -- Unreadable state (another type, or fields that are not a window,
    -- four counts and a factor) is repaired: the limit is decided as
    -- fresh.
    repair(state[i])
    w, sc, spv, soc, sopv, sf, sft = nil, nil, nil, nil, nil, nil, nil
  end
  local ws, c, pv = counter_at(now, p, w, sc, spv)
  local _, oc, opv = counter_at(now, p, w, soc, sopv)
  local f, ft = sf or 0, sft or 0
  local acc = estimate(now, ws, p, c, pv)
  start[i], cur0[i], prev0[i], ocur0[i], oprev0[i] = ws, c, pv, oc + cost, opv
  f1[i], ft1[i] = f, ft
  factor[i], drawn[i] = 0, false
  rem0[i] = floor_units(hard - acc, hard)
  if c > 0 then
    reset0[i] = ws + 2 * p - now
  elseif pv > 0 then
    reset0[i] = ws + p - now
  else
    reset0[i] = 0
  end
  -- What a refused request waits for: room under the hard limit, or, for
  -- a request refused by the draw, under the soft limit (its own cost when
  -- larger), where it is admitted whatever the draw.
  local limit = hard
  if acc + cost <= soft then
    ok[i] = true
  elseif acc + cost > hard then
    ok[i] = false
    factor[i] = 1000000
  else
    local cache = math.floor(p / 10)
    if cache > 100000 then
      cache = 100000
    end
    -- Aim at admitting, over the next period, soft * (hard - acc) /
    -- (hard - soft) units out of the offered load: the rate at the soft
    -- limit, down to none at the hard limit.
    local off = estimate(now, ws, p, oc, opv)
    local share = soft * (hard - acc) / ((hard - soft) * (off + cost))
    local fnew = math.floor((1 - share) * 1000000 + 0.5)
    if fnew < 0 then
      fnew = 0
    elseif fnew > 1000000 then
      fnew = 1000000
    end
    -- The cached factor holds while it is fresh and not below the new
    -- one: suppression rises at once, and eases off at most once per
    -- cache period.
    if not (ft <= now and now - ft < cache and f >= fnew) then
      f = fnew
      f1[i], ft1[i] = f, now
    end
    factor[i], drawn[i] = f, true
    ok[i] = draw * 1000000 >= f
    limit = soft
    if cost > soft then
      limit = cost
    end
  end
  if ok[i] then
    rem1[i] = floor_units(hard - (acc + cost), hard)
    reset1[i] = ws + 2 * p - now
    retry[i] = 0
  else
    allowed = false
    if acc + cost <= limit then
      -- A cost above the soft limit, with nothing accepted in the window:
      -- the draw alone decides, and a retry may be admitted at once.
      retry[i] = 1
    else
      -- As for the sliding window counter, with limit for the capacity.
      retry[i] = counter_wait(ws, p, c, pv, w, sc, spv, limit)
    end
  end
end

-- write stores every limit's windows with the request counted as offered,
-- and as accepted too when accepted is true. The state matters until the
-- end of the window after the current one.
local function write(accepted)
  for i = 1, n do
    local c = cur0[i]
    if accepted then
      c = c + cost
    end
    redis.call('HSET', state[i], 'w', int(start[i]), 'cur', int(c),
      'prev', int(prev0[i]), 'ocur', int(ocur0[i]), 'oprev', int(oprev0[i]),
      'f', int(f1[i]), 'ft', int(ft1[i]))
    redis.call('PEXPIRE', state[i], int(ttl_ms(start[i] + 2 * period[i] - now)))
  end
end

-- record counts an admitted request as offered and accepted.
local function record()
  write(true)
end

-- settle runs on a take that records no admission: a refused request
-- counts as offered; a duplicate writes nothing but gives a state key
-- left without TTL its TTL.
local function settle()
  if duplicate then
    for i = 1, n do
      expire(state[i], start[i] + 2 * period[i] - now)
    end
  else
    write(false)
  end
end

-- The reply of the full scripts, then the largest factor met (ppm) and 1
-- when every refusing limit refused by the draw.
local r = finish(record, settle)
local most, by_draw = 0, r[1] == 0
for i = 1, n do
  if factor[i] > most then
    most = factor[i]
  end
  if not ok[i] and not drawn[i] then
    by_draw = false
  end
end
r[#r + 1] = most
if by_draw then
  r[#r + 1] = 1
else
  r[#r + 1] = 0
end
return r
