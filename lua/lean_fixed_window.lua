-- lean_fixed_window.lua: fixed_window.lua for one plain limit, after
-- lean_args.lua: the same state (a hash {w, cur}), arithmetic and calls,
-- with scalars only.
local ws = now - math.fmod(now, p)
local we = ws + p
local c = 0
-- same: the key holds this window's count, and so already the TTL a take
-- in this window gives it (the window's end). Only a key whose TTL was set
-- under this period (field p, which every script that sets the TTL
-- writes) has it: after a reload that changed the period of a named
-- limit, the window kept below can be one the old period started, whose
-- key expires at the old window's end.
local same = false
local st = redis.pcall('HMGET', key, 'w', 'cur', 'p')
local w, sc
if st[1] then
  w, sc = tonumber(st[1]), tonumber(st[2])
end
if st.err or (st[1] and not (w and w >= 0 and w <= 9007199254740992
    and sc and sc >= 0 and sc <= 9007199254740992)) then
  repair(key)
elseif w and w >= ws then
  -- w > ws only when the server clock went back (or the period grew):
  -- keep the newer window.
  ws, c, same = w, sc, st[3] == ARGV[4]
  we = ws - math.fmod(ws, p) + p
end
local left = we - now
if c + cost <= cap then
  if take then
    -- The key keeps its window and period (fields w and p): only cur
    -- changes.
    if same then
      redis.call('HSET', key, 'cur', int(c + cost))
    else
      redis.call('HSET', key, 'w', int(ws), 'cur', int(c + cost), 'p', ARGV[4])
      redis.call('PEXPIRE', key, int(ttl_ms(left)))
    end
  end
  return {1, cap - c - cost, left, 0, repaired}
end
if take then
  expire(key, left)
end
local reset = 0
if c > 0 then
  reset = left
end
return {0, floor_units(cap - c, cap), reset, left, repaired}
