-- fixed_window.lua: a fixed window written as a user script, under the
-- contract in package lua ("User scripts"). It makes the built-in fixed
-- window's decisions and passes the conformance suite's plain subset.
--
-- KEYS[1] is a hash {w, cur}: the start of the window (µs, a multiple of
-- the period) and the units counted in it.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local key = KEYS[1]
local mode = ARGV[1]
local cost, cap, period = tonumber(ARGV[2]), tonumber(ARGV[5]), tonumber(ARGV[4])

local ws = now - math.fmod(now, period)
local c = 0
local st = redis.call('HMGET', key, 'w', 'cur')
if st[1] then
  local w = tonumber(st[1])
  if w and w >= ws then
    ws = w
    c = tonumber(st[2]) or 0
  end
end
local left = ws + period - now

if c + cost <= cap then
  if mode == 'take' then
    redis.call('HSET', key, 'w', string.format('%d', ws), 'cur', string.format('%d', c + cost))
    redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil(left / 1000))))
  end
  return {1, cap - c - cost, left, 0}
end
local reset = 0
if c > 0 then
  reset = left
end
return {0, math.max(0, cap - c), reset, left}
