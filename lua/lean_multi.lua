-- lean_multi.lua: follows common.lua and unreadable.lua. The stacked script for a step whose
-- every part is a plain GCRA or token bucket request: one limit, no block,
-- no counted refusals, no de-duplication id, no override. Each part is
-- decided with bucket.lua's arithmetic, written with scalars as in
-- lean_bucket.lua, then written all or nothing as multi.lua does. The
-- reply is flat: the stack's allowed flag, then each part's lean reply.
-- See "Stacked decisions" in doc.go.
--
--   KEYS       each part's state key, in part order; with receipts, then
--              one receipt key per part
--   ARGV[1]    "take" or "peek"
--   ARGV[2]    the receipts' TTL in ms (takes only), "" for none
--   ARGV[3]    p, the number of parts
--   then       per part: cost, rate, period µs, capacity
local receipt_ms = tonumber(ARGV[2])
local receipts = ARGV[2] ~= ''
local np = tonumber(ARGV[3])
if (not take and mode ~= 'peek') or (receipts and not (take and receipt_ms and receipt_ms >= 1))
    or not np or np < 1 or #ARGV ~= 3 + 4 * np then
  error('ratekeeper: malformed arguments')
end
local nr = 0
if receipts then
  nr = np
end
if #KEYS ~= np + nr then
  error('ratekeeper: malformed arguments')
end

-- Per part j: cost, rate, period and capacity; used and ts, the stored
-- state (false when there is none); u, the units used now; ok, whether
-- the part admits the request; part_repaired, whether a take deleted its
-- state. Each table starts with room for two parts, the common stack (a
-- client's limit and a route-wide one): growing nine empty tables to two
-- elements cost about 8% of a stacked decision.
local cost, rate, period, cap = {false, false}, {false, false}, {false, false}, {false, false}
local used, ts, u, ok, part_repaired = {false, false}, {false, false}, {false, false}, {false, false}, {false, false}
local all = true
for j = 1, np do
  local a = 3 + 4 * (j - 1)
  local c, r, p, b = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  if not c or c < 1 or not r or r < 1 or not p or p < 1000 or not b or b < 1 then
    error('ratekeeper: malformed part ' .. j)
  end
  cost[j], rate[j], period[j], cap[j] = c, r, p, b
  u[j], part_repaired[j] = 0, 0
  -- State that cannot be read is deleted by a take and decided as fresh,
  -- as in lean_bucket.lua; so is a placeholder, silently.
  local stored = redis.pcall('GET', KEYS[j])
  if stored then
    local t, x
    if type(stored) == 'string' and #stored == 16 then
      t, x = struct.unpack('<d<d', stored)
    end
    if x and x >= 0 and x <= 9007199254740992 and t >= 0 and t <= 9007199254740992 then
      ts[j], used[j] = t, x
      local d = now - t
      if d < 0 then
        d = 0
      end
      local v = x - d * r / p
      if v > 0 then
        u[j] = v
      end
    elseif take then
      -- A placeholder (see common.lua) is an absent key, not a repair.
      redis.call('DEL', KEYS[j])
      if stored ~= placeholder then
        part_repaired[j] = 1
      end
    end
  end
  ok[j] = u[j] + c <= b
  all = all and ok[j]
end

-- reply is the flat reply: the stack's allowed flag, then each part's
-- lean reply (see part_reply); n, its length.
local reply, n = {0}, 1
if all then
  reply[1] = 1
end

-- part_reply appends part j's lean reply: allowed (as the part alone
-- would answer), its units remaining and reset after, the retry after of
-- a refusing part, and whether its state was repaired.
local function part_reply(allowed, rem, reset, retry, j)
  local a = 0
  if allowed then
    a = 1
  end
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = a, rem, reset, retry, part_repaired[j]
  n = n + 5
end
for j = 1, np do
  local c, r, p, b = cost[j], rate[j], period[j], cap[j]
  if all then
    local v = u[j] + c
    local reset = ceil_us(v * p / r)
    if take then
      redis.call('SET', KEYS[j], struct.pack('<d<d', now, v), 'PX', int(ttl_ms(reset)))
      if receipts then
        redis.call('SET', KEYS[np + j], int(now), 'PX', int(math.min(receipt_ms, ttl_ms(p))))
      end
    end
    part_reply(true, floor_units(b - v, b), reset, 0, j)
  else
    -- Refused, by this part or another: nothing is recorded, and a state
    -- key left without a TTL gets the one its units call for.
    local reset = ceil_us(u[j] * p / r)
    if take then
      expire(KEYS[j], reset)
    end
    local retry = 0
    if not ok[j] then
      local x, t = used[j], ts[j]
      retry = earliest(ceil_us((u[j] + c - b) * p / r), function(d)
        if not x then
          return c <= b
        end
        local e = now + d - t
        if e < 0 then
          e = 0
        end
        local w = x - e * r / p
        if w < 0 then
          w = 0
        end
        return w + c <= b
      end)
    end
    part_reply(ok[j], floor_units(b - u[j], b), reset, retry, j)
  end
end
return reply
