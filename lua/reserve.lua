-- reserve.lua: the driver of a reservation (package store's
-- Request.Reserve). It follows common.lua and a full script without it,
-- wrapped as the function decide, so that the clock it reads is the one
-- the decision used: the reply is the full script's with the decision's
-- time (µs) appended. See "Reservations" in doc.go.
local reply = decide()
reply[#reply + 1] = now
return reply
