-- release: delete the lock if it is ours and tell waiters on the release channel.
-- KEYS[1] lock key
-- ARGV[1] our random token, ARGV[2] release channel,
-- ARGV[3] "SPUBLISH" to publish with sharded pub/sub (Redis Cluster), anything else: PUBLISH
-- Reply {1, listeners} released (listeners: how many subscribers heard it), {0, 0} not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local publish = 'PUBLISH'
  if ARGV[3] == 'SPUBLISH' then
    publish = 'SPUBLISH'
  end
  return {1, redis.call(publish, ARGV[2], '')}
end
return {0, 0}
