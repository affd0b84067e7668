-- raise (after the prelude queue.lua): while the lock is ours, raise the fence counter to
-- at least T.
-- KEYS[1] lock key, KEYS[2] fence counter key
-- ARGV[1] our random token, ARGV[2] T as a decimal string
-- Reply {1} the counter is now >= T, {0} the lock is not ours here (nothing changed).
-- Raising only where we hold the lock orders the raise before any later acquisition on
-- this node: the next owner can take the key only after ours is gone.
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
