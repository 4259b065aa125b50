-- gcra.lua: generic cell rate algorithm. state[i] holds limit i's state as
-- one string "<ts>:<tokens>": the time of the last admission in integer
-- microseconds and the tokens left then (see bucket in the prelude). It
-- expires when the theoretical arrival time has passed.
if count_denied then
  error('ratekeeper: counting refused requests needs a window algorithm')
end
local left = {}
for i = 1, n do
  local tokens, ts
  local stored = redis.call('GET', state[i])
  if stored then
    local a, b = string.match(stored, '^(%d+):(.+)$')
    ts, tokens = tonumber(a), tonumber(b)
    if not ts or not tokens then
      error('ratekeeper: malformed GCRA state')
    end
  end
  left[i] = bucket(i, tokens, ts)
end

-- record takes the request's tokens from every limit; finish calls it for
-- admitted requests only.
local function record()
  for i = 1, n do
    redis.call('SET', state[i], string.format('%d:%.17g', now, left[i]),
      'PX', int(ttl_ms(reset1[i])))
  end
end

return finish(record)
