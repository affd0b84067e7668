-- leader: KEYS[1] lock, KEYS[2] election record ("<token> <value>").
-- Replies: {1, n, c1, c2, ...} the record, whose token holds the lock: n bytes, six to a
-- number, the first byte most significant; {0} no such record.
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
