-- lean_multi_windows.lua: follows common.lua, unreadable.lua, the line
-- "local cost = 0" and counter.lua. The stacked script for a
-- step whose every part is a plain request (one limit, no block, no
-- counted refusals, no de-duplication id, no override) of GCRA, the token
-- bucket, the fixed window, the sliding window counter or the sliding
-- window log, with at least one window part: a step of GCRA and token
-- bucket parts only runs lean_multi.lua, which does less per part. Each
-- part is decided with its algorithm file's arithmetic, written with
-- scalars as in the lean scripts, then written all or nothing as
-- multi.lua does. The reply is flat: the stack's allowed flag, then each
-- part's lean reply. See "Stacked decisions" in doc.go.
--
--   KEYS       each part's state key, in part order; with receipts, then
--              one receipt key per part
--   ARGV[1]    "take" or "peek"
--   ARGV[2]    the receipts' TTL in ms (takes only), "" for none
--   ARGV[3]    p, the number of parts
--   then       per part: algorithm index (store's order), cost, rate,
--              period µs, capacity
--   then       the nonce of each sliding window log part, in part order
--              (its units' members, as the part's full script names them)
--
-- counter.lua's functions read the request's cost from the variable cost
-- declared before it: it is set to a part's cost before they decide that
-- part.
local receipt_ms = tonumber(ARGV[2])
local receipts = ARGV[2] ~= ''
local np = tonumber(ARGV[3])
if (not take and mode ~= 'peek') or (receipts and not (take and receipt_ms and receipt_ms >= 1))
    or not np or np < 1 or #ARGV < 3 + 5 * np then
  error('ratekeeper: malformed arguments')
end
local nr = 0
if receipts then
  nr = np
end
if #KEYS ~= np + nr then
  error('ratekeeper: malformed arguments')
end

-- The algorithm indexes of package store.
local GCRA, TOKEN_BUCKET, SLIDING_WINDOW_LOG, SLIDING_WINDOW_COUNTER, FIXED_WINDOW = 0, 1, 2, 3, 4

-- Each part j is decided into parts[j]: its algorithm k, cost c, period p
-- and capacity b; ok, whether it admits the request; rem0, reset0 and
-- nxt0, the limit without the request (nxt: the wait for one unit more,
-- the counter and the log only); rem1, reset1 and nxt1, after it
-- (admitting parts); retry, the wait of a refusing part; life, how long
-- its state matters without the request (its TTL on a refusal; false for
-- a log with no unit in its window), life1 with it; repaired, whether a
-- take deleted its unreadable state; and what an admission writes: for
-- the buckets the units v, for the windows the window w and its counts n
-- (and pv, the counter's previous window), for the log its nonce. A
-- window part also has ps, its period as the arguments give it, and same,
-- whether its key holds this window under that period, so that an
-- admission changes only its count.
local parts = {}

-- bucket_part decides a part of GCRA or the token bucket (bucket.lua):
-- state {ts, used} packed as two doubles. It reads and waits as
-- lean_multi.lua's loop does; the two are kept apart because sharing a
-- function measured 3% more instructions per call of lean_multi.lua, the
-- script of the most common stacks.
local function bucket_part(j, q, r)
  local c, p, b = q.c, q.p, q.b
  local u, used, ts = 0, nil, nil
  -- State that cannot be read is deleted by a take and decided as fresh,
  -- as in lean_bucket.lua; so is a placeholder, silently.
  local stored = redis.pcall('GET', KEYS[j])
  if stored then
    local t, x
    if type(stored) == 'string' and #stored == 16 then
      t, x = struct.unpack('<d<d', stored)
    end
    if x and x >= 0 and x <= 9007199254740992 and t >= 0 and t <= 9007199254740992 then
      ts, used = t, x
      local d = now - t
      if d < 0 then
        d = 0
      end
      local v = x - d * r / p
      if v > 0 then
        u = v
      end
    elseif take then
      -- A placeholder (see common.lua) is an absent key, not a repair.
      redis.call('DEL', KEYS[j])
      if stored ~= placeholder then
        q.repaired = 1
      end
    end
  end
  q.ok = u + c <= b
  q.rem0, q.reset0 = floor_units(b - u, b), ceil_us(u * p / r)
  q.life = q.reset0
  if q.ok then
    local v = u + c
    q.v, q.rem1, q.reset1 = v, floor_units(b - v, b), ceil_us(v * p / r)
    q.life1 = q.reset1
    return
  end
  q.retry = earliest(ceil_us((u + c - b) * p / r), function(d)
    if not used then
      return c <= b
    end
    local e = now + d - ts
    if e < 0 then
      e = 0
    end
    local w = used - e * r / p
    if w < 0 then
      w = 0
    end
    return w + c <= b
  end)
end

-- repair_part is unreadable.lua's repair for part q, whose flag is the
-- part's own.
local function repair_part(j, q)
  repaired = 0
  repair(KEYS[j])
  q.repaired = repaired
end

-- fixed_window_part decides a part of the fixed window
-- (fixed_window.lua): state a hash {w, cur}.
local function fixed_window_part(j, q)
  local c, p, b = q.c, q.p, q.b
  local ws = now - math.fmod(now, p)
  local we = ws + p
  local n = 0
  local st = redis.pcall('HMGET', KEYS[j], 'w', 'cur', 'p')
  local w, sc
  if st[1] then
    w, sc = tonumber(st[1]), tonumber(st[2])
  end
  if st.err or (st[1] and not (w and w >= 0 and w <= 9007199254740992
      and sc and sc >= 0 and sc <= 9007199254740992)) then
    repair_part(j, q)
  elseif w and w >= ws then
    -- w > ws only when the server clock went back: keep the newer
    -- window. The key keeps fields w and p when it was written under
    -- this period (see lean_fixed_window.lua).
    ws, n, q.same = w, sc, st[3] == q.ps
    we = ws - math.fmod(ws, p) + p
  end
  local left = we - now
  q.ok = n + c <= b
  q.rem0, q.reset0, q.life = floor_units(b - n, b), 0, left
  if n > 0 then
    q.reset0 = left
  end
  if q.ok then
    q.rem1, q.reset1 = b - n - c, left
    q.w, q.n, q.life1 = ws, n + c, left
  else
    q.retry = left
  end
end

-- counter_part decides a part of the sliding window counter
-- (sliding_window_counter.lua): state a hash {w, cur, prev}.
local function counter_part(j, q)
  local c, p, b = q.c, q.p, q.b
  cost = c
  local w, sc, spv
  local st = redis.pcall('HMGET', KEYS[j], 'w', 'cur', 'prev', 'p')
  if st[1] then
    w, sc, spv = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
  end
  if st.err or (st[1] and not (w and w >= 0 and w <= 9007199254740992
      and sc and sc >= 0 and sc <= 9007199254740992
      and spv and spv >= 0 and spv <= 9007199254740992)) then
    repair_part(j, q)
    w, sc, spv = nil, nil, nil
  end
  local ws, n, pv = counter_at(now, p, w, sc, spv)
  -- The key keeps fields w, prev and p when it holds this window, written
  -- under this period (see lean_sliding_window_counter.lua).
  q.same = w == ws and st[4] == q.ps
  local est = estimate(now, ws, p, n, pv)
  q.rem0, q.life = floor_units(b - est, b), ws + 2 * p - now
  if n > 0 then
    q.reset0 = ws + 2 * p - now
  elseif pv > 0 then
    q.reset0 = ws + p - now
  else
    q.reset0 = 0
  end
  -- One unit more fits once est + rem + 1 <= b: the wait of this cost
  -- under b - rem - 1 + cost.
  q.nxt0 = 0
  if q.rem0 < b then
    q.nxt0 = counter_wait(ws, p, n, pv, w, sc, spv, b - q.rem0 - 1 + c)
  end
  q.ok = est + c <= b
  if q.ok then
    q.rem1, q.reset1 = floor_units(b - (est + c), b), ws + 2 * p - now
    q.nxt1 = 0
    if q.rem1 < b then
      q.nxt1 = counter_wait(ws, p, n + c, pv, ws, n + c, pv, b - q.rem1 - 1 + c)
    end
    q.w, q.n, q.pv, q.life1 = ws, n + c, pv, ws + 2 * p - now
  else
    q.retry = counter_wait(ws, p, n, pv, w, sc, spv, b)
  end
end

-- log_part decides a part of the sliding window log
-- (sliding_window_log.lua for one limit): state a sorted set of units
-- scored with their time in µs. It reads as that script does and writes
-- nothing: a take trims and adds only when every part admits. A log with
-- no unit inside the window has no life (q.life false): a refusal leaves
-- its TTL alone, as the full script's does.
local function log_part(j, q)
  local c, p, b, key = q.c, q.p, q.b, KEYS[j]
  local count = redis.pcall('ZCOUNT', key, '(' .. int(now - p), '+inf')
  local newest = nil
  if type(count) ~= 'number' then
    repair_part(j, q)
    count = 0
  elseif count > 0 then
    -- The newest unit is inside the window; a score beyond any time (a
    -- member written by hand) makes the log unreadable.
    newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
    if not (newest and newest <= 9007199254740992) then
      repair_part(j, q)
      count, newest = 0, nil
    end
  end
  q.rem0, q.reset0, q.nxt0, q.life = floor_units(b - count, b), 0, 0, false
  if newest then
    q.reset0, q.life = newest + p - now, newest + p - now
    -- One unit more fits once the (capacity - remaining)-th newest unit
    -- has left the window (the newest itself at rank -1).
    local rank = q.rem0 - b
    q.nxt0 = q.reset0
    if rank ~= -1 then
      q.nxt0 = tonumber(redis.call('ZRANGE', key, int(rank), int(rank), 'WITHSCORES')[2]) + p - now
    end
  end
  q.ok = count + c <= b
  if q.ok then
    q.rem1, q.reset1, q.nxt1, q.life1 = b - count - c, p, p, p
    if count > 0 then
      q.nxt1 = q.nxt0
    end
    return
  end
  -- The request fits once the (capacity - cost + 1)-th newest unit has
  -- left the window; a unit read above is not read again.
  local rank = c - b - 1
  if rank == -1 then
    q.retry = q.reset0
  elseif rank == q.rem0 - b then
    q.retry = q.nxt0
  else
    q.retry = tonumber(redis.call('ZRANGE', key, int(rank), int(rank), 'WITHSCORES')[2]) + p - now
  end
end

local all = true
local logs = 3 + 5 * np -- the ARGV before the next log part's nonce
for j = 1, np do
  local a = 3 + 5 * (j - 1)
  local k, c, r, p, b = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
    tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  if not (k == GCRA or k == TOKEN_BUCKET or k == SLIDING_WINDOW_COUNTER or k == FIXED_WINDOW
      or k == SLIDING_WINDOW_LOG) or not c or c < 1 or not r or r < 1 or not p or p < 1000 or not b or b < 1 then
    error('ratekeeper: malformed part ' .. j)
  end
  -- Every field a bucket part sets is set here, so that its table is
  -- sized once (a window part's grows once more).
  local q = {k = k, c = c, p = p, b = b, ok = false, rem0 = 0, reset0 = 0, rem1 = 0, reset1 = 0,
    retry = 0, life = 0, life1 = 0, repaired = 0, v = 0, same = false}
  parts[j] = q
  if k == GCRA or k == TOKEN_BUCKET then
    bucket_part(j, q, r)
  elseif k == FIXED_WINDOW then
    q.ps = ARGV[a + 4]
    fixed_window_part(j, q)
  elseif k == SLIDING_WINDOW_COUNTER then
    q.ps = ARGV[a + 4]
    counter_part(j, q)
  else
    logs = logs + 1
    q.nonce = ARGV[logs]
    if not q.nonce then
      error('ratekeeper: malformed part ' .. j)
    end
    log_part(j, q)
  end
  all = all and q.ok
end
if #ARGV ~= logs then
  error('ratekeeper: malformed arguments')
end

-- reply is the flat reply: the stack's allowed flag, then each part's
-- lean reply (see part_reply); at, its length.
local reply, at = {0}, 1
if all then
  reply[1] = 1
end

-- part_reply appends part q's lean reply: allowed (as the part alone
-- would answer), its units remaining and reset after, the retry after of
-- a refusing part, whether its state was repaired, then, for the counter
-- and the log, the wait for one unit more.
local function part_reply(q, allowed, rem, reset, wait, nxt)
  local a = 0
  if allowed then
    a = 1
  end
  reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5] = a, rem, reset, wait, q.repaired
  at = at + 5
  if q.k == SLIDING_WINDOW_COUNTER or q.k == SLIDING_WINDOW_LOG then
    at = at + 1
    reply[at] = nxt
  end
end
for j = 1, np do
  local q, key = parts[j], KEYS[j]
  local k = q.k
  if all then
    if take then
      -- A window part whose key keeps its other fields writes its count
      -- alone. It still sets the TTL, as the general script does: a
      -- state left without one (by hand) gets it back on an admission.
      if q.same then
        redis.call('HSET', key, 'cur', int(q.n))
        redis.call('PEXPIRE', key, int(ttl_ms(q.life1)))
      elseif k == FIXED_WINDOW then
        redis.call('HSET', key, 'w', int(q.w), 'cur', int(q.n), 'p', int(q.p))
        redis.call('PEXPIRE', key, int(ttl_ms(q.life1)))
      elseif k == SLIDING_WINDOW_COUNTER then
        redis.call('HSET', key, 'w', int(q.w), 'cur', int(q.n), 'prev', int(q.pv), 'p', int(q.p))
        redis.call('PEXPIRE', key, int(ttl_ms(q.life1)))
      elseif k == SLIDING_WINDOW_LOG then
        -- Units outside the window go first, then this request's, named
        -- as the full script names them (a refund finds them by nonce).
        redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - q.p))
        local score = int(now)
        local u = 1
        while u <= q.c do
          local args = {'ZADD', key}
          local last = math.min(q.c, u + 999)
          for m = u, last do
            args[#args + 1] = score
            args[#args + 1] = string.format('%d:%s:%d', now, q.nonce, m)
          end
          redis.call(unpack(args))
          u = last + 1
        end
        redis.call('PEXPIRE', key, int(ttl_ms(q.p)))
      else
        redis.call('SET', key, struct.pack('<d<d', now, q.v), 'PX', int(ttl_ms(q.life1)))
      end
      if receipts then
        redis.call('SET', KEYS[np + j], int(now), 'PX', int(math.min(receipt_ms, ttl_ms(q.p))))
      end
    end
    part_reply(q, true, q.rem1, q.reset1, 0, q.nxt1)
  else
    -- Refused, by this part or another: nothing is recorded, and a state
    -- key left without a TTL gets the one its state calls for.
    if take and q.life then
      expire(key, q.life)
    end
    part_reply(q, q.ok, q.rem0, q.reset0, q.retry, q.nxt0)
  end
end
return reply
