-- lean_sliding_window_log.lua: sliding_window_log.lua for one plain limit,
-- after lean_window.lua: the same state (one sorted set of units scored
-- with their time in µs) and arithmetic, with scalars only and fewer
-- calls. It reads the newest unit first: an empty log, or one whose
-- newest unit has left the window, needs no count, and a log holding
-- nothing to drop needs no trim. ARGV[6] is the take's nonce. The reply
-- has a sixth integer: the time until one unit more is admitted (µs).
local nonce = ARGV[6] or ''
local cutoff = now - p
local count, newest = 0, nil
local top = redis.pcall('ZRANGE', key, '-1', '-1', 'WITHSCORES')
if not top.err and top[2] then
  newest = tonumber(top[2])
end
if top.err or (top[2] and not (newest and newest <= 9007199254740992)) then
  -- Unreadable (another type, or a unit scored beyond any time): repaired,
  -- and decided as an empty log.
  repair(key)
  newest = nil
end
if newest and newest > cutoff then
  count = redis.call('ZCOUNT', key, '(' .. int(cutoff), '+inf')
end
if count + cost <= cap then
  -- One unit more than remains fits once the oldest unit inside the
  -- window has left it (read before the trim and the add below move the
  -- ranks), or, for a log that held none, once this request's units have.
  local nxt = p
  if count > 0 then
    nxt = tonumber(redis.call('ZRANGE', key, -count, -count, 'WITHSCORES')[2]) + p - now
  end
  if take then
    -- Units at or before the cutoff are outside the window and go first;
    -- an empty log has none.
    if newest then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff))
    end
    local score = int(now)
    if cost == 1 then
      redis.call('ZADD', key, score, score .. ':' .. nonce .. ':1')
    else
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
    end
    redis.call('PEXPIRE', key, int(ttl_ms(p)))
  end
  return {1, cap - count - cost, p, 0, repaired, nxt}
end
-- Refused: count + cost > cap >= cost, so count > 0 and the newest unit is
-- inside the window. The request fits once the (cap - cost + 1)-th newest
-- unit has left it.
local rank = int(cost - cap - 1)
local kth = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
if take then
  expire(key, newest + p - now)
end
-- One unit more than remains fits once the (capacity - remaining)-th
-- newest unit has left the window.
local rem = floor_units(cap - count, cap)
local nrank = int(rem - cap)
local nxt = tonumber(redis.call('ZRANGE', key, nrank, nrank, 'WITHSCORES')[2]) + p - now
return {0, rem, newest + p - now, tonumber(kth[2]) + p - now, repaired, nxt}
