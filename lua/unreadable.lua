-- unreadable.lua: follows common.lua in the full scripts and the lean
-- scripts of the window algorithms: the handling of state a script cannot
-- read, and of keys without a TTL (see "Unreadable state" in doc.go).

-- repaired becomes 1 when a take deleted state it could not read.
local repaired = 0

-- repair deletes key, whose state cannot be read (of another type, whose
-- error redis.pcall hands back, or malformed), so that the request is
-- decided as if it were absent. A peek deletes nothing: it only decides
-- as if the key were absent. A placeholder (see common.lua) reaches here
-- too, as a string no algorithm can read: it is an absent key, not
-- damage, so a take deletes it without reporting a repair. Telling the
-- two apart costs one GET, on this path only.
local function repair(key)
  if take then
    if redis.pcall('GET', key) ~= placeholder then
      repaired = 1
    end
    redis.call('DEL', key)
  end
end

-- expire gives key, when it has no TTL (written by hand, or by an older
-- version), the TTL its state calls for: us microseconds from now.
local function expire(key, us)
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, int(ttl_ms(us)))
  end
end
