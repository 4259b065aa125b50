-- sliding_window_log.lua: state[1] is one sorted set shared by every limit
-- of the request. Each recorded unit is a member "<now>:<nonce>:<j>" scored
-- with its time in microseconds. A unit is inside limit i's window when its
-- score is greater than now - period[i]. Window algorithms count up to the
-- capacity, the rate.
local key = state[1]
local newest = nil
local most = 0 -- the largest rate
-- fresh: the log is decided as empty, after a repair.
local fresh = false

-- evaluate fills the verdicts of every limit. It returns false, having
-- decided nothing, when the log cannot be read: another type, or a unit
-- scored beyond any time (a member written by hand with score +inf).
local function evaluate()
  for i = 1, n do
    local p, r = period[i], cap[i]
    if rate[i] > most then
      most = rate[i]
    end
    local count = 0
    if not fresh then
      count = redis.pcall('ZCOUNT', key, '(' .. int(now - p), '+inf')
      if type(count) ~= 'number' then
        return false
      end
    end
    rem0[i] = floor_units(r - count, r)
    reset0[i] = 0
    next0[i] = 0
    if count > 0 then
      -- The newest unit overall is inside every window that holds any.
      if not newest then
        newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
        if not (newest and newest <= 9007199254740992) then
          return false
        end
      end
      reset0[i] = newest + p - now
      -- One unit more fits once the (capacity - remaining)-th newest unit
      -- has left the window (the newest itself when that is rank -1).
      local rank = rem0[i] - r
      next0[i] = reset0[i]
      if rank ~= -1 then
        next0[i] = tonumber(redis.call('ZRANGE', key, int(rank), int(rank), 'WITHSCORES')[2]) + p - now
      end
    end
    if count + cost <= r then
      -- After this request the newest unit is at now.
      ok[i] = true
      rem1[i] = r - count - cost
      reset1[i] = p
      next1[i] = p
      if count > 0 then
        next1[i] = next0[i]
      end
      retry[i] = 0
    else
      ok[i] = false
      allowed = false
      -- The request fits once at most capacity - cost units are left in
      -- the window: once the (capacity - cost + 1)-th newest unit has
      -- left it. Rank access from the end is O(log n); a unit read above
      -- (the newest, or the one next0 names: cost - 1 = rem0) is not read
      -- again.
      local rank = cost - r - 1
      if rank == -1 then
        retry[i] = reset0[i]
      elseif rank == rem0[i] - r then
        retry[i] = next0[i]
      else
        retry[i] = tonumber(redis.call('ZRANGE', key, int(rank), int(rank), 'WITHSCORES')[2]) + p - now
      end
    end
  end
  return true
end

if not evaluate() then
  -- Unreadable: repaired, and every limit sees an empty log.
  repair(key)
  fresh, newest, allowed = true, nil, true
  evaluate()
end

-- settle gives the log, when it has no TTL, the one its newest unit calls
-- for.
local function settle()
  if newest then
    expire(key, newest + longest - now)
  end
end

-- record adds the request's units at now: an admitted request, or a
-- refused one whose attempts count. Units at or before now - longest are
-- outside every window and go first. Counted refusals can outgrow every
-- window's capacity, so the log then keeps only its newest (largest rate
-- + cost) units: a decision, or a retry time, never looks past the
-- (capacity - cost + 1)-th newest unit, so the trim changes none of them.
local function record()
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
  local score = int(now)
  local j = 1
  while j <= cost do
    local args = {'ZADD', key}
    local last = math.min(cost, j + 999)
    for u = j, last do
      args[#args + 1] = score
      args[#args + 1] = string.format('%d:%s:%d', now, nonce, u)
    end
    redis.call(unpack(args))
    j = last + 1
  end
  if count_denied then
    redis.call('ZREMRANGEBYRANK', key, '0', int(-(most + cost) - 1))
  end
  redis.call('PEXPIRE', key, int(ttl_ms(longest)))
end

return finish(record, settle)
