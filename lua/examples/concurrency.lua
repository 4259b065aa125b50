-- concurrency.lua: a per-key concurrency cap written as a user script,
-- under the contract in package lua ("User scripts"), which no built-in
-- algorithm expresses: at most capacity requests of a key run at once.
-- Mode "take" holds cost slots, "release" gives them back when the
-- request ends; a slot a crashed process never released is freed one
-- period after the key's last change.
--
-- KEYS[1] is a counter of the slots held.
local key = KEYS[1]
local mode = ARGV[1]
local cost, period, cap = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ttl = math.max(1, math.ceil(period / 1000))
local n = tonumber(redis.call('GET', key) or '0')

if mode == 'release' then
  if n > 0 then
    n = redis.call('DECRBY', key, math.min(cost, n))
  end
  if n > 0 then
    redis.call('PEXPIRE', key, ttl)
  else
    redis.call('DEL', key)
  end
  return {1, cap - n, 0, 0}
end

if n + cost <= cap then
  if mode == 'take' then
    redis.call('INCRBY', key, cost)
    redis.call('PEXPIRE', key, ttl)
  end
  return {1, cap - n - cost, ttl * 1000, 0}
end
-- Nobody knows when a slot frees: ask the client to come back in a
-- second (or the period, when shorter).
return {0, math.max(0, cap - n), ttl * 1000, math.min(period, 1000000)}
