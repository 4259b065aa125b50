-- calendar.lua: follows common.lua in the calendar script, before the
-- prelude. The Redis store appends to the full script's arguments, per
-- limit, the starts of four consecutive calendar windows around its own
-- clock (0 0 0 0 for a limit of aligned windows), which the store
-- computes in the limit's time zone (package store, "Calendar quotas").
-- They are taken off ARGV here, so the prelude sees a full script's
-- arguments. See doc.go.
local bounds = {}
do
  local n = tonumber(ARGV[8])
  if not n or n < 1 or #ARGV ~= 9 + 10 * n then
    error('ratekeeper: malformed arguments')
  end
  local base = 9 + 6 * n
  for i = 1, n do
    local k = base + 4 * (i - 1)
    local b = {tonumber(ARGV[k + 1]), tonumber(ARGV[k + 2]), tonumber(ARGV[k + 3]), tonumber(ARGV[k + 4])}
    if not (b[1] and b[2] and b[3] and b[4]) then
      error('ratekeeper: malformed arguments')
    end
    if b[4] > 0 then
      if not (b[1] < b[2] and b[2] < b[3] and b[3] < b[4]) then
        error('ratekeeper: malformed arguments')
      end
      bounds[i] = b
    end
  end
  for j = #ARGV, base + 1, -1 do
    ARGV[j] = nil
  end
end
