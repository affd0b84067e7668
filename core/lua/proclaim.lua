-- proclaim: while the lock is ours, record its holder's value, for Leader to read, and say
-- so to those who observe the election.
-- KEYS[1] lock key, KEYS[2] the election's record
-- ARGV[1] our token, ARGV[2] the channel of the election's changes, ARGV[3] "SPUBLISH" to
-- publish with sharded pub/sub (Redis Cluster), anything else: PUBLISH, ARGV[4] our value,
-- ARGV[5] how long the record is kept (ms)
-- Reply {1, heard} recorded, heard: how many subscribers heard "<token> <value>"; {0} the
-- lock is not ours here (nothing changed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local record = ARGV[1] .. ' ' .. ARGV[4]
redis.call('SET', KEYS[2], record, 'PX', ARGV[5])
local publish = 'PUBLISH'
if ARGV[3] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
return {1, redis.call(publish, ARGV[2], record)}
