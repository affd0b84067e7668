-- rextend: renew a reader's share if it is still ours. Never re-creates a missing entry.
-- KEYS[1] lock key, KEYS[2] readers (see queue.lua)
-- ARGV[1] our token, ARGV[2] TTL in milliseconds
-- Reply {1} extended, {0} our entry is gone or its time is up, or readers no longer hold
-- the lock.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) <= now or redis.call('GET', KEYS[1]) ~= '(readers)' then
  return {0}
end
local ms = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], string.format('%d', now + ms), ARGV[1])
for _, k in ipairs({KEYS[1], KEYS[2]}) do
  if redis.call('PTTL', k) < ms then
    redis.call('PEXPIRE', k, ms)
  end
end
return {1}
