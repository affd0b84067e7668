-- raise: KEYS[1] lock, KEYS[2] fence counter (a set's: each name's two, name after name);
-- ARGV[1] token, ARGV[2] T (a decimal).
-- Replies: {1} each counter is now >= T; {0} a lock is not ours here (nothing changed).
for i = 1, #KEYS, 2 do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return {0}
  end
end
for i = 2, #KEYS, 2 do
  local counter = redis.call('GET', KEYS[i])
  if not counter or tonumber(counter) < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[i], ARGV[2], 'PX', fence_idle)
  else
    redis.call('PEXPIRE', KEYS[i], fence_idle)
  end
end
return {1}
