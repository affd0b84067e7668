-- extend: reset the TTL if the lock is still ours. Never re-creates a missing key.
-- KEYS[1] lock key
-- ARGV[1] our random token, ARGV[2] TTL in milliseconds
-- Reply {1} extended, {0} the key is gone or someone else's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
return {0}
