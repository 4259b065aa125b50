-- prelude.lua: shared by every ratekeeper script. The loader places it in
-- front of one algorithm file; the result is one script. See doc.go for the
-- KEYS/ARGV contract and the reply.
--
-- Arithmetic follows the Go in-memory store step for step: integer
-- microseconds, float64 where a rate divides time, expressions evaluated
-- left to right in the same order, so that both stores reach the same
-- decisions.

-- ceil_us rounds a duration in microseconds up; zero when not positive.
local function ceil_us(x)
  if not (x > 0) then
    return 0
  end
  return math.ceil(x)
end

-- floor_units rounds a number of units down, within [0, hi].
local function floor_units(x, hi)
  if not (x > 0) then
    return 0
  end
  if x >= hi then
    return hi
  end
  return math.floor(x)
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
  local ms = math.ceil(us / 1000)
  if ms < 1 then
    return 1
  end
  return ms
end

-- int formats an integral number for a Redis argument. Lua's own number to
-- string conversion keeps only 14 significant digits.
local function int(x)
  return string.format('%d', x)
end

-- Support Redis 3.2-4.0, where writing after TIME needs effect replication.
-- Newer servers always replicate effects and accept the call as a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local mode = ARGV[1]
local take = mode == 'take'
local cost = tonumber(ARGV[2])
local nonce = ARGV[3]
local replay_ms = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
if (not take and mode ~= 'peek') or not cost or cost < 1 or not replay_ms
    or not n or n < 1 or #ARGV ~= 5 + 3 * n then
  error('ratekeeper: malformed arguments')
end

-- Per limit i: rate, period (µs) and capacity from ARGV.
local rate, period, cap = {}, {}, {}
for i = 1, n do
  local b = 5 + 3 * (i - 1)
  rate[i] = tonumber(ARGV[b + 1])
  period[i] = tonumber(ARGV[b + 2])
  cap[i] = tonumber(ARGV[b + 3])
  if not rate[i] or rate[i] < 1 or not period[i] or period[i] < 1000
      or not cap[i] or cap[i] < 1 then
    error('ratekeeper: malformed limit ' .. i)
  end
end

-- A take attempt that already wrote state has a replay record: answer with
-- it instead of counting the same attempt again.
if take and replay_ms > 0 then
  local rec = redis.call('GET', KEYS[1])
  if rec then
    local out = {}
    for v in string.gmatch(rec, '[^,]+') do
      out[#out + 1] = tonumber(v)
    end
    out[6] = 1
    return out
  end
end

-- The algorithm fills, per limit i: ok[i], whether it admits the request;
-- rem0[i] and reset0[i] (µs), the limit without the request; rem1[i] and
-- reset1[i], the limit after the request (only when ok[i]); retry[i] (µs),
-- the wait of a refusing limit. All are integers. allowed is true while
-- every limit admits.
local ok, rem0, reset0, rem1, reset1, retry = {}, {}, {}, {}, {}, {}
local allowed = true

-- finish picks the deciding limit, stores the replay record when the script
-- wrote state, and returns the reply.
local function finish(wrote)
  local rem, reset = rem0, reset0
  if allowed then
    rem, reset = rem1, reset1
  end
  local d = 0
  for i = 1, n do
    if allowed then
      if d == 0 or rem[i] < rem[d] then
        d = i
      end
    elseif not ok[i] and (d == 0 or retry[i] > retry[d]) then
      d = i
    end
  end
  local r = {0, d - 1, rem[d], reset[d], retry[d], 0}
  if allowed then
    r[1] = 1
    r[5] = 0
  end
  for i = 1, n do
    r[5 + 2 * i] = rem[i]
    r[6 + 2 * i] = reset[i]
  end
  if wrote and replay_ms > 0 then
    local parts = {}
    for i = 1, #r do
      parts[i] = int(r[i])
    end
    redis.call('SET', KEYS[1], table.concat(parts, ','), 'PX', int(replay_ms))
  end
  return r
end

-- GCRA and the token bucket make the same decisions: a theoretical arrival
-- time TAT is the bucket seen from the other side, TAT = ts + (B - tokens)
-- * P / R. Both keep {ts, tokens}, which stays exact where an absolute
-- float TAT would not (0.25µs resolution at today's epoch, and sums of
-- fractional emission intervals drift past the tolerance).

-- bucket_tokens returns the tokens of limit i at time t, given the stored
-- tokens at time ts (nil when there is no state): full when absent, else
-- refilled by (t - ts) * R / P up to the capacity.
local function bucket_tokens(i, tokens, ts, t)
  if not tokens then
    return cap[i]
  end
  local d = t - ts
  if d < 0 then
    d = 0
  end
  return math.min(tokens + d * rate[i] / period[i], cap[i])
end

-- bucket decides limit i from its stored state and returns the tokens left
-- after an admitted request.
local function bucket(i, tokens, ts)
  local r, p, b = rate[i], period[i], cap[i]
  local tok = bucket_tokens(i, tokens, ts, now)
  rem0[i] = floor_units(tok, b)
  reset0[i] = ceil_us((b - tok) * p / r)
  if tok >= cost then
    local left = tok - cost
    ok[i] = true
    rem1[i] = floor_units(left, b)
    reset1[i] = ceil_us((b - left) * p / r)
    retry[i] = 0
    return left
  end
  ok[i] = false
  allowed = false
  retry[i] = earliest(ceil_us((cost - tok) * p / r), function(d)
    return bucket_tokens(i, tokens, ts, now + d) >= cost
  end)
  return nil
end

-- The algorithm follows.
