-- extend: KEYS[1] lock; ARGV[1] token, ARGV[2] TTL ms.
-- Replies: {1} extended; {0} the key is gone or another's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1}
end
return {0}
