-- extend: KEYS per name its lock and fence counter (a set's: name after name); ARGV[1]
-- token, ARGV[2] TTL ms, ARGV[3] (if given) the holder's fence ("0": none): a name that is
-- free is taken, and every counter below the fence raised to it. Replies: {1} extended;
-- {2} some name was free and is taken; {0} a name is another's, or gone (nothing changed).
local took = false
for i = 1, #KEYS, 2 do
  local holder = redis.call('GET', KEYS[i])
  if holder ~= ARGV[1] and (holder or not ARGV[3]) then
    return {0}
  end
  took = took or not holder
end
for i = 1, #KEYS, 2 do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local counter = ARGV[3] and ARGV[3] ~= '0' and (redis.call('GET', KEYS[i + 1]) or '0')
  if counter and tonumber(counter) < tonumber(ARGV[3]) then
    redis.call('SET', KEYS[i + 1], ARGV[3], 'PX', fence_idle)
  end
end
return {took and 2 or 1}
