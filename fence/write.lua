-- The guarded write of package fence: it writes a record only if the write's fencing token is
-- not older than the highest token the record has seen, and gives the record a TTL.
--
-- KEYS[1]  the record: a hash with the fields "token" (the highest token written, as 20
--          zero-padded decimal digits) and "value" (the value written with it)
-- ARGV[1]  the write's token, as 20 zero-padded decimal digits
-- ARGV[2]  the value
-- ARGV[3]  the record's TTL, in milliseconds
--
-- Replies {1} when it wrote the record and set its TTL; {0, high, low} when it refused the
-- write because the record holds a higher token, whose first and last 10 digits are high
-- and low (each below 2^53, so a Lua number holds it exactly); {-1} when the record's token
-- field is not 20 digits (written by something else), which it leaves alone.
--
-- Strings of 20 digits order as the numbers they spell, so the comparison is exact for every
-- uint64, where tonumber would round above 2^53. A refused write changes nothing, not even
-- the TTL. A key of another type than a hash makes HGET fail with WRONGTYPE.
local highest = redis.call('HGET', KEYS[1], 'token')
if highest then
  if #highest ~= 20 or not string.match(highest, '^%d+$') then
    return {-1}
  end
  if ARGV[1] < highest then
    return {0, tonumber(string.sub(highest, 1, 10)), tonumber(string.sub(highest, 11, 20))}
  end
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1}
