-- multi.lua: the end of the stacked script, after one function per
-- algorithm (parts[algorithm index], each the full prelude, part.lua and
-- the algorithm file). It evaluates every part, then writes: all of them
-- when every part admits, else only what each part's refusal writes. See
-- "Stacked decisions" in doc.go.
local receipt_ms = tonumber(ARGV[2])
local receipts = ARGV[2] ~= ''
local np = tonumber(ARGV[3])
if (not take and mode ~= 'peek') or (receipts and not (take and receipt_ms and receipt_ms >= 1))
    or not np or np < 1 then
  error('ratekeeper: malformed arguments')
end

local verdicts = {}
local all = true
local ki, ai = 0, 3 + 3 * np
for j = 1, np do
  local h = 3 + 3 * (j - 1)
  local f = parts[tonumber(ARGV[h + 1])]
  local nk, na = tonumber(ARGV[h + 2]), tonumber(ARGV[h + 3])
  if not f or not nk or not na or nk < 1 or na < 1 then
    error('ratekeeper: malformed part ' .. j)
  end
  local k, a = {}, {}
  for i = 1, nk do
    k[i] = KEYS[ki + i]
  end
  for i = 1, na do
    a[i] = ARGV[ai + i]
  end
  ki, ai = ki + nk, ai + na
  if a[1] ~= mode then
    error('ratekeeper: malformed part ' .. j)
  end
  verdicts[j] = f(k, a)
  all = all and verdicts[j].admits
end
local nr = 0
if receipts then
  nr = np
end
if ki + nr ~= #KEYS or ai ~= #ARGV then
  error('ratekeeper: malformed arguments')
end

-- A receipt, written with the admission of a part that does not count
-- refusals, lets a later refund (refund.lua) undo exactly this take, once.
-- It holds the take's time and lives receipt_ms, while a refund may come,
-- or less when the part's longest period is shorter.
local reply = {0}
if all then
  reply[1] = 1
end
for j = 1, np do
  local v = verdicts[j]
  if all or not v.admits then
    reply[j + 1] = v.commit()
  else
    reply[j + 1] = v.hold()
  end
  if all and receipts and not v.counts_denied then
    redis.call('SET', KEYS[ki + j], int(now), 'PX', int(math.min(receipt_ms, ttl_ms(v.longest))))
  end
end
return reply
