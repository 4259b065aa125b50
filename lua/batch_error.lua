-- batch_error.lua: how a batch driver (lean_batch.lua, stacked_batch.lua)
-- answers a request that failed, which stops nothing else of its batch:
-- as one string, not as an error reply, for a client may stop reading an
-- array at an error element of some codes. A Redis error (READONLY, OOM,
-- WRONGTYPE...) keeps its code, which tells the store what it means;
-- pcall hands it back as a string (or as a table with an err field). Any
-- other error is a Lua error, which Redis would have answered as ERR.
local function batch_error(err)
  local msg = err
  if type(msg) == 'table' and msg.err then
    msg = msg.err
  end
  msg = tostring(msg)
  if not string.find(msg, '^%u[%u%d_]* ') then
    msg = 'ERR ' .. msg
  end
  return msg
end
