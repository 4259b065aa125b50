-- part.lua: follows prelude.lua and precedes the algorithm file inside
-- each part of a stacked decision (see "Stacked decisions" in doc.go). It
-- keeps the prelude's finish and shadows it with one that writes nothing
-- and hands the part's verdict to multi.lua, which writes only once every
-- part of the stack has been evaluated.
local finish_alone = finish

local function finish(record, settle)
  local part = {admits = not blocked and (allowed or duplicate), counts_denied = count_denied, longest = longest}
  -- commit writes and answers as the part decided alone would: the stack
  -- admits the request, or this part refuses it.
  part.commit = function()
    return finish_alone(record, settle)
  end
  -- hold answers for a part that admits the request while another part
  -- refuses it: nothing is recorded (a counted refusal is), no block
  -- starts, and the reply describes the limits as they stand, with the
  -- allowed flag telling that this part alone would admit.
  part.hold = function()
    if take then
      if count_denied then
        record()
      else
        settle()
      end
    end
    local d = 1
    for i = 2, n do
      if rem0[i] < rem0[d] then
        d = i
      end
    end
    local r = {1, d - 1, rem0[d], reset0[d], 0, 0, 0, 0, repaired, 0}
    for i = 1, n do
      r[9 + 2 * i] = rem0[i]
      r[10 + 2 * i] = reset0[i]
    end
    r[#r + 1] = ''
    r[#r + 1] = ''
    if next0[1] then
      for i = 1, n do
        r[#r + 1] = next0[i]
      end
    end
    return r
  end
  return part
end
