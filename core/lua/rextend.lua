-- rextend: KEYS[1] lock, KEYS[2] readers; ARGV[1] token, ARGV[2] TTL ms.
-- Replies: {1} renewed; {0} our entry is gone or out of time, or readers do not hold the lock.
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) <= now_ms() or redis.call('GET', KEYS[1]) ~= readers_hold then
  return {0}
end
read_grant(KEYS[1], KEYS[2], ARGV[1], ARGV[2], true)
return {1}
