-- partial.lua: the driver of a partial grant (package store, "Partial
-- grants"). It follows a full script wrapped as the function decide, which
-- reads KEYS and ARGV when it runs: it decides one unit as a peek, then the
-- request with the grant that measurement allows (one unit when none fits)
-- in the request's own mode, all in this one script call. See doc.go.

local want = tonumber(ARGV[2])
local wanted_mode = ARGV[1]
if not want or want < 1 or (wanted_mode ~= 'take' and wanted_mode ~= 'peek') then
  error('ratekeeper: malformed arguments')
end

ARGV[1] = 'peek'
ARGV[2] = '1'
local probe = decide()
local granted = 0
-- probe[3] is the deciding limit's remaining units after one unit: the
-- fewest of all limits when one unit fits.
if probe[1] == 1 then
  granted = math.min(want, probe[3] + 1)
end

ARGV[1] = wanted_mode
ARGV[2] = string.format('%d', math.max(granted, 1))
local reply = decide()
if reply[1] ~= 1 then
  granted = 0
end
reply[#reply + 1] = granted
return reply
