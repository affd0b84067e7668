-- extend: the one script that renews a lock: it resets the TTL of what is the caller's,
-- and only if all of it still is. A writer's lock ("w"): KEYS per name its lock key and
-- fence counter (a set's: name after name); a semaphore's permit ("p"): the permit, the
-- semaphore's fence counter and its record of K. ARGV[4], if given and not "0", raises
-- each counter below it to it. A reader's share ("r"): KEYS per name its lock key and
-- readers key. ARGV[1] token, ARGV[2] TTL ms, ARGV[3] the mode. Replies:
-- {1} renewed; {0} some of it is another's, gone, or out of time (nothing changed).
local token, ttl, fence = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4] or '0')
local readers_hold = '(readers)' -- the lock key's value while readers hold it
if ARGV[3] ~= 'w' and ARGV[3] ~= 'r' and ARGV[3] ~= 'p' then
  return redis.error_reply('ERR extend: mode ' .. tostring(ARGV[3]) .. ': want w, r or p')
end
local fence_idle = 3600000 -- core.FenceIdle in ms

local function cover(key, ms) -- key's TTL to at least ms
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

if ARGV[3] == 'r' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for i = 1, #KEYS, 2 do
    local score = redis.call('ZSCORE', KEYS[i + 1], token)
    if not score or tonumber(score) <= now or redis.call('GET', KEYS[i]) ~= readers_hold then
      return {0}
    end
  end
  for i = 1, #KEYS, 2 do
    redis.call('ZADD', KEYS[i + 1], string.format('%d', now + ttl), token)
    cover(KEYS[i], ttl)
    cover(KEYS[i + 1], ttl)
  end
  return {1}
end
local step = ARGV[3] == 'p' and 3 or 2
for i = 1, #KEYS, step do
  if redis.call('GET', KEYS[i]) ~= token then
    return {0}
  end
end
for i = 1, #KEYS, step do
  redis.call('PEXPIRE', KEYS[i], ttl)
  local counter = fence > 0 and tonumber(redis.call('GET', KEYS[i + 1]) or '0')
  if counter and counter < fence then
    redis.call('SET', KEYS[i + 1], ARGV[4], 'PX', fence_idle)
  end
end
if step == 3 then -- the semaphore's record stands while its permit may be held
  cover(KEYS[3], ttl)
end
return {1}
