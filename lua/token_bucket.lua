-- token_bucket.lua: KEYS[1 + i] is a hash {tokens, ts} for limit i: the
-- tokens left (float) at time ts (integer microseconds), refilled by the
-- prelude's bucket. A missing hash is a full bucket; the hash expires when
-- the bucket would be full again.
local left = {}
for i = 1, n do
  local tokens, ts
  local st = redis.call('HMGET', KEYS[1 + i], 'tokens', 'ts')
  if st[1] and st[2] then
    tokens, ts = tonumber(st[1]), tonumber(st[2])
    if not ts or not tokens then
      error('ratekeeper: malformed token bucket state')
    end
  end
  left[i] = bucket(i, tokens, ts)
end

local wrote = false
if allowed and take then
  for i = 1, n do
    redis.call('HSET', KEYS[1 + i], 'tokens', string.format('%.17g', left[i]),
      'ts', int(now))
    redis.call('PEXPIRE', KEYS[1 + i], int(ttl_ms(reset1[i])))
  end
  wrote = true
end
return finish(wrote)
