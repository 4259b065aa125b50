-- token_bucket.lua: state[i] is a hash {tokens, ts} for limit i: the
-- tokens left (float) at time ts (integer microseconds), refilled by the
-- prelude's bucket. A missing hash is a full bucket; the hash expires when
-- the bucket would be full again.
if count_denied then
  error('ratekeeper: counting refused requests needs a window algorithm')
end
local left = {}
for i = 1, n do
  local tokens, ts
  local st = redis.call('HMGET', state[i], 'tokens', 'ts')
  if st[1] and st[2] then
    tokens, ts = tonumber(st[1]), tonumber(st[2])
    if not ts or not tokens then
      error('ratekeeper: malformed token bucket state')
    end
  end
  left[i] = bucket(i, tokens, ts)
end

-- record takes the request's tokens from every limit; finish calls it for
-- admitted requests only.
local function record()
  for i = 1, n do
    redis.call('HSET', state[i], 'tokens', string.format('%.17g', left[i]),
      'ts', int(now))
    redis.call('PEXPIRE', state[i], int(ttl_ms(reset1[i])))
  end
end

return finish(record)
