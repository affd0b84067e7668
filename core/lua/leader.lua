-- leader: the record of the election's leader, if its token holds the lock here.
-- KEYS[1] lock key, KEYS[2] the election's record ("<token> <value>", see proclaim)
-- Reply {1, n, c1, c2, ...} the record, whose token holds the lock: n bytes, six to a
-- number (c1 holds bytes 1 to 6, the first the most significant; the last number holds the
-- rest), as a reply carries only integers, and Lua numbers are exact to 2^53; {0} no record
-- here whose token holds the lock.
local record = redis.call('GET', KEYS[2])
if not record then
  return {0}
end
local token = string.match(record, '^(%S+) ')
if not token or redis.call('GET', KEYS[1]) ~= token then
  return {0}
end
local reply = {1, #record}
for i = 1, #record, 6 do
  local n = 0
  for j = i, math.min(i + 5, #record) do
    n = n * 256 + string.byte(record, j)
  end
  reply[#reply + 1] = n
end
return reply
