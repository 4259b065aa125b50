-- common.lua: the start of every ratekeeper script: rounding helpers and
-- the clock. The full scripts go on with prelude.lua and one algorithm
-- file, the lean scripts (one plain limit) with their lean files. See
-- doc.go for the calling conventions and package store for the semantics.
--
-- Arithmetic follows the Go in-memory store step for step: integer
-- microseconds, float64 where a rate divides time, expressions evaluated
-- left to right in the same order, so that both stores reach the same
-- decisions.

-- The library functions the helpers below call, read once per call of
-- the script rather than once for each of their several calls per
-- decision.
local ceil, floor, format = math.ceil, math.floor, string.format

-- ceil_us rounds a duration in microseconds up; zero when not positive.
local function ceil_us(x)
  if not (x > 0) then
    return 0
  end
  return ceil(x)
end

-- floor_units rounds a number of units down, within [0, hi].
local function floor_units(x, hi)
  if not (x > 0) then
    return 0
  end
  if x >= hi then
    return hi
  end
  return floor(x)
end

-- earliest returns the smallest d >= 1 near guess for which ok(d) holds. ok
-- is the admission test a later call would run, monotone in d, so a
-- retry time computed in floating point becomes exact to the microsecond.
local function earliest(guess, ok)
  local d = guess
  if d < 1 then
    d = 1
  end
  local i = 0
  while i < 64 and not ok(d) do
    d = d + 1
    i = i + 1
  end
  i = 0
  while i < 64 and d > 1 and ok(d - 1) do
    d = d - 1
    i = i + 1
  end
  return d
end

-- ttl_ms turns how long state still matters (microseconds) into a key TTL in
-- whole milliseconds, rounded up and at least 1 (PEXPIRE 0 would delete).
local function ttl_ms(us)
  local ms = ceil(us / 1000)
  if ms < 1 then
    return 1
  end
  return ms
end

-- int formats an integral number for a Redis argument. Lua's own number to
-- string conversion keeps only 14 significant digits.
local function int(x)
  return format('%d', x)
end

-- placeholder is the value of a key created only so that a command naming
-- several keys runs on a Redis Cluster slot being migrated (see "Slot
-- migration" in doc.go). No store writes it as state: every script reads
-- it as an absent key, and a take deletes it when it does not write over
-- it.
local placeholder = '\0rk:absent'

-- Writing after TIME needs effect replication, the default since Redis 5.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- The mode is every script's first argument: 'take' decides and records,
-- 'peek' decides and writes nothing (user scripts may know others).
local mode = ARGV[1]
local take = mode == 'take'
