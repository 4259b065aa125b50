-- lean_sliding_window_log.lua: sliding_window_log.lua for one plain limit,
-- after lean_args.lua: the same state (one sorted set of units scored
-- with their time in µs) and arithmetic, with scalars only and fewer
-- calls. ARGV[6] is the take's nonce. The reply has a sixth integer: the
-- time until one unit more is admitted (µs).
--
-- It counts with calls that answer integers: ZCARD, which also finds a key
-- of another type, then on a take the trim of the units at or before the
-- cutoff (outside the window, and the first to go when units are added),
-- refused or not, so that the count is what the trim leaves; on a peek,
-- which writes nothing, ZCOUNT. Scores are read (ZRANGE WITHSCORES, the
-- costliest call) only where the reply needs them, and ranks are passed
-- as strings: Redis formats a number argument as a double, which costs
-- more. A unit scored beyond any time (a member written by hand with
-- score +inf) makes the log unreadable, as in the full script: the newest
-- unit tells on a refusal, the oldest inside the window or ZCOUNT above
-- 2^53 on an admission.
local nonce = ARGV[6] or ''
local cutoff = now - p
local absurd = 9007199254740992 -- 2^53: no time is later
-- count: the units inside the window, the log's last count ranks.
local count = 0
local card = redis.pcall('ZCARD', key)
if type(card) ~= 'number' then
  -- Another type: repaired, and decided as an empty log.
  repair(key)
  card = 0
end
if card > 0 then
  if take then
    count = card - redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff))
  else
    count = redis.call('ZCOUNT', key, '(' .. int(cutoff), '+inf')
  end
end
local newest, oldest = nil, nil
if count > 0 and count + cost > cap then
  -- Refused unless unreadable: the newest unit is inside the window.
  newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  if not (newest and newest <= absurd) then
    repair(key)
    count = 0
  end
elseif count > 0 then
  -- One unit more than remains fits once the oldest unit inside the
  -- window has left it: rank 0 after a take's trim.
  local first = '0'
  if not take then
    first = int(card - count)
  end
  oldest = tonumber(redis.call('ZRANGE', key, first, first, 'WITHSCORES')[2])
  if not (oldest and oldest <= absurd)
      or (count > 1 and redis.call('ZCOUNT', key, '(9007199254740992', '+inf') > 0) then
    repair(key)
    count = 0
  end
end
if count + cost <= cap then
  -- For a log that held no unit inside the window, one unit more than
  -- remains fits once this request's units have left it.
  local nxt = p
  if count > 0 then
    nxt = oldest + p - now
  end
  if take then
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
-- Refused: count + cost > cap >= cost, so count > 0. The request fits once
-- the (cap - cost + 1)-th newest unit has left the window, and one unit
-- more than remains once the (capacity - remaining)-th newest unit has.
-- Rank access from the end is O(log n); a unit already read (the newest,
-- rank -1, or the same rank twice: cost 1 on a full log) is not read again.
local rank = cost - cap - 1
local rem = floor_units(cap - count, cap)
local nrank = rem - cap
local kth = newest
if rank ~= -1 then
  kth = tonumber(redis.call('ZRANGE', key, int(rank), int(rank), 'WITHSCORES')[2])
end
local nth = kth
if nrank ~= rank then
  nth = newest
  if nrank ~= -1 then
    nth = tonumber(redis.call('ZRANGE', key, int(nrank), int(nrank), 'WITHSCORES')[2])
  end
end
if take then
  expire(key, newest + p - now)
end
return {0, rem, newest + p - now, kth + p - now, repaired, nth + p - now}
