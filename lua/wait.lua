-- wait.lua: the driver of a request that may wait instead of being refused
-- (package store, "Waiting instead of refusing"), and the give-back of the
-- place such a request reserved. It follows common.lua and the full script
-- of GCRA and the token bucket wrapped as the function decide, which reads
-- KEYS, ARGV, mode, take and now when it runs. See doc.go, "Waiting".

-- valid_state returns the 16 bytes of a readable state, or those of an
-- absent one ({0, 0}: no units) for anything else.
local function valid_state(v)
  if type(v) == 'string' and #v == 16 and v ~= placeholder then
    local ts, used = struct.unpack('<d<d', v)
    if used >= 0 and used <= 9007199254740992 and ts >= 0 and ts <= 9007199254740992 then
      return v
    end
  end
  return struct.pack('<d<d', 0, 0)
end

if mode == 'cancel' then
  local res, n = ARGV[2], tonumber(ARGV[3])
  if not n or n < 1 or #KEYS ~= n or #ARGV ~= 3 + 2 * n or #res ~= 32 * n then
    error('ratekeeper: malformed arguments')
  end
  local back = 0
  for i = 1, n do
    local r, p = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
    if not r or r < 1 or not p or p < 1000 then
      error('ratekeeper: malformed arguments')
    end
    -- A state written since the reservation (a later request queued
    -- behind it) keeps the units: the later ones' times stay exact.
    if redis.pcall('GET', KEYS[i]) == string.sub(res, 32 * i - 15, 32 * i) then
      local before = string.sub(res, 32 * i - 31, 32 * i - 16)
      local ts, used = struct.unpack('<d<d', before)
      local from = math.max(ts, now)
      local u = used - (from - ts) * r / p
      if u <= 0 then
        redis.call('DEL', KEYS[i])
      else
        redis.call('SET', KEYS[i], before, 'PX', int(ttl_ms(from - now + ceil_us(u * p / r))))
      end
      back = back + 1
    end
  end
  return back
end

local max_wait, n, cost_of_wait = tonumber(ARGV[#ARGV]), tonumber(ARGV[8]), tonumber(ARGV[2])
if not max_wait or max_wait < 0 or not n or n < 1 or not cost_of_wait or (not take and mode ~= 'peek') then
  error('ratekeeper: malformed arguments')
end
ARGV[#ARGV] = nil
local wanted = mode

-- With a blocking limit the first decision is a peek, so that a refusal
-- that will wait starts no block.
local blocking = false
for i = 1, n do
  if ARGV[6 * i + 7] ~= '0' then
    blocking = true
  end
end
if blocking then
  mode, take = 'peek', false
end
local reply = decide()
local delay = reply[5]
if reply[1] == 1 or reply[6] == 1 or delay > max_wait then
  if blocking and wanted == 'take' then
    mode, take = 'take', true
    reply = decide()
  end
  reply[#reply + 1] = 0
  reply[#reply + 1] = ''
  return reply
end

-- The request fits every limit delay µs from now: it is decided again as
-- at that time, then each limit's state is moved back to now on the same
-- line (its units at that time plus what drains until then), so that it
-- counts the request from now on and expires when its units have
-- drained.
local before = {}
for i = 1, n do
  before[i] = valid_state(redis.pcall('GET', KEYS[4 + i]))
end
local repaired_first = reply[9]
now = now + delay
mode, take = 'peek', false
reply = decide()
now = now - delay
if reply[1] ~= 1 then
  error('ratekeeper: a reservation did not fit')
end
if repaired_first == 1 then
  reply[9] = 1
end
local parts = {}
for i = 1, n do
  local r, p = tonumber(ARGV[6 * i + 4]), tonumber(ARGV[6 * i + 5])
  local ts, used = struct.unpack('<d<d', before[i])
  local d = now + delay - ts
  if d < 0 then
    d = 0
  end
  local u = used - d * r / p
  if u < 0 then
    u = 0
  end
  local v = u + cost_of_wait + delay * r / p
  reply[10 + 2 * i] = ceil_us(v * p / r)
  parts[2 * i - 1] = before[i]
  parts[2 * i] = struct.pack('<d<d', now, v)
  if wanted == 'take' then
    redis.call('SET', KEYS[4 + i], parts[2 * i], 'PX', int(ttl_ms(reply[10 + 2 * i])))
  end
end
reply[4] = reply[10 + 2 * (reply[2] + 1)]
local res = ''
if wanted == 'take' then
  res = table.concat(parts)
end
reply[#reply + 1] = delay
reply[#reply + 1] = res
return reply
