-- raise: KEYS[1] lock, KEYS[2] fence counter; ARGV[1] token, ARGV[2] T (a decimal).
-- Replies: {1} the counter is now >= T; {0} the lock is not ours here (nothing changed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local counter = redis.call('GET', KEYS[2])
if not counter or tonumber(counter) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', fence_idle)
else
  redis.call('PEXPIRE', KEYS[2], fence_idle)
end
return {1}
