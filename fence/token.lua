-- Reads the highest token of a record of package fence (see write.lua).
--
-- KEYS[1]  the record
--
-- Replies {} when there is no record or it has no token; {high, low} with the first and last
-- 10 digits of its token; {-1} when the token field is not 20 digits. A key of another type
-- than a hash makes HGET fail with WRONGTYPE.
local highest = redis.call('HGET', KEYS[1], 'token')
if not highest then
  return {}
end
if #highest ~= 20 or not string.match(highest, '^%d+$') then
  return {-1}
end
return {tonumber(string.sub(highest, 1, 10)), tonumber(string.sub(highest, 11, 20))}
