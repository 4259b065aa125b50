-- sliding_window_log.lua: KEYS[2] is one sorted set shared by every limit of
-- the request. Each admitted unit is a member "<now>:<nonce>:<j>" scored
-- with its time in microseconds. A unit is inside limit i's window when its
-- score is greater than now - period[i]. Window algorithms count up to the
-- capacity, which is the rate unless the limit trips on reaching it.
local key = KEYS[2]
local longest = 0
local newest = nil
for i = 1, n do
  local p, r = period[i], cap[i]
  if p > longest then
    longest = p
  end
  local count = redis.call('ZCOUNT', key, '(' .. int(now - p), '+inf')
  rem0[i] = floor_units(r - count, r)
  reset0[i] = 0
  if count > 0 then
    -- The newest unit overall is inside every window that holds any.
    if not newest then
      newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
    end
    reset0[i] = newest + p - now
  end
  if count + cost <= r then
    -- After this request the newest unit is at now.
    ok[i] = true
    rem1[i] = r - count - cost
    reset1[i] = p
    retry[i] = 0
  else
    ok[i] = false
    allowed = false
    -- The window holds the count highest-ranked members. The k-th oldest of
    -- them, k = count + cost - capacity, has rank k - 1 - count from the
    -- end; once it leaves the window the request fits. Rank access is
    -- O(log n).
    local rank = int(count + cost - r - 1 - count)
    local kth = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    retry[i] = tonumber(kth[2]) + p - now
  end
end

local wrote = false
if allowed and take then
  -- Units at or before now - longest are outside every window.
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
  redis.call('PEXPIRE', key, int(ttl_ms(longest)))
  wrote = true
end
return finish(wrote)
