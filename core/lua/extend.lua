-- extend: KEYS[1] lock, KEYS[2] fence counter; ARGV[1] token, ARGV[2] TTL ms, ARGV[3] (if
-- given) the holder's fence ("0": none), to take the lock where it is free and raise the
-- counter to it. Replies: {1} extended; {2} taken where it was free; {0} another's, or gone.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
elseif holder or not ARGV[3] then
  return {0}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local counter = ARGV[3] ~= '0' and redis.call('GET', KEYS[2])
if ARGV[3] ~= '0' and (not counter or tonumber(counter) < tonumber(ARGV[3])) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', fence_idle)
end
return {2}
