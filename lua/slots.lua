-- slots.lua: follows common.lua. The slots of an in-flight cap (package
-- store's SlotStore): one sorted set per cap key, a member per holder id
-- scored with the end of its lease (µs, on TIME). A lease that ends at
-- or before now has ended: it is dropped before anything is counted. See
-- "In-flight caps" in doc.go.
--
--   KEYS[1]   the cap's slot set
--   ARGV[1]   "acquire", "release" or "renew"
--   acquire:  ARGV[2] id, ARGV[3] max, ARGV[4] lease µs
--             reply {acquired (1 or 0), live slots held after the call}
--   release:  ARGV[2] id; reply: live slots held after the call
--   renew:    ARGV[2] lease µs, ARGV[3..] ids; reply: ids renewed

local key = KEYS[1]

-- live prunes the ended leases and returns how many slots are held. A
-- key of another type (or a migration placeholder) holds none: it is
-- deleted, and written over by an acquire.
local function live()
  local r = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', now)
  if type(r) == 'table' and r.err then
    redis.call('DEL', key)
    return 0
  end
  return redis.call('ZCARD', key)
end

-- expire gives the set the TTL of its longest lease, or deletes it when
-- it holds nothing.
local function expire(n)
  if n == 0 then
    redis.call('DEL', key)
    return
  end
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, int(ttl_ms(tonumber(top[2]) - now)))
end

local n = live()
if mode == 'acquire' then
  local id, cap, lease = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  if not redis.call('ZSCORE', key, id) and n >= cap then
    return {0, n}
  end
  redis.call('ZADD', key, now + lease, id)
  n = redis.call('ZCARD', key)
  expire(n)
  return {1, n}
elseif mode == 'release' then
  n = n - redis.call('ZREM', key, ARGV[2])
  expire(n)
  return n
elseif mode == 'renew' then
  local lease, renewed = tonumber(ARGV[2]), 0
  for i = 3, #ARGV do
    renewed = renewed + redis.call('ZADD', key, 'XX', 'CH', now + lease, ARGV[i])
  end
  expire(n)
  return renewed
end
return redis.error_reply('ERR slots: unknown mode ' .. tostring(mode))
