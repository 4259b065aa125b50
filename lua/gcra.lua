-- gcra.lua: generic cell rate algorithm. KEYS[1 + i] holds limit i's state
-- as one string "<ts>:<tokens>": the time of the last admission in integer
-- microseconds and the tokens left then (see bucket in the prelude). It
-- expires when the theoretical arrival time has passed.
local left = {}
for i = 1, n do
  local tokens, ts
  local stored = redis.call('GET', KEYS[1 + i])
  if stored then
    local a, b = string.match(stored, '^(%d+):(.+)$')
    ts, tokens = tonumber(a), tonumber(b)
    if not ts or not tokens then
      error('ratekeeper: malformed GCRA state')
    end
  end
  left[i] = bucket(i, tokens, ts)
end

local wrote = false
if allowed and take then
  for i = 1, n do
    redis.call('SET', KEYS[1 + i], string.format('%d:%.17g', now, left[i]),
      'PX', int(ttl_ms(reset1[i])))
  end
  wrote = true
end
return finish(wrote)
