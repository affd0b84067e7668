-- acquire: take the lock if it is free (or already ours) and advance the fence counter.
-- KEYS[1] lock key, KEYS[2] fence counter key
-- ARGV[1] our random token, ARGV[2] TTL in milliseconds
-- Reply {1, fence} when the lock is ours: newly set, or already set with our token (a retry
-- after a lost reply). The counter becomes max(counter + 1, server time in microseconds), so a
-- node that lost its data does not start again from 1.
-- Reply {0, pttl} when another owner holds it: the longest this node can keep us waiting.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis 3.2 to 4 need this before TIME; later versions ignore it
end
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local t = redis.call('TIME')
-- Compose the microseconds as a decimal string: exact, and never printed in exponent form.
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local counter = redis.call('GET', KEYS[2])
if counter and tonumber(counter) >= tonumber(now) then
  return {1, redis.call('INCR', KEYS[2])}
end
redis.call('SET', KEYS[2], now)
return {1, tonumber(now)}
