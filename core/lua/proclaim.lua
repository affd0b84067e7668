-- proclaim: KEYS[1] lock, KEYS[2] election record; ARGV[1] token, ARGV[2] channel, ARGV[3]
-- "SPUBLISH" for sharded pub/sub, ARGV[4] value, ARGV[5] how long the record is kept (ms).
-- Replies: {1, heard} recorded, heard: how many subscribers heard "<token> <value>", which is
-- published only where the record is new (a record kept again is no news); {0} the lock is
-- not ours here (nothing changed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local record = ARGV[1] .. ' ' .. ARGV[4]
local kept = redis.call('GET', KEYS[2]) == record
redis.call('SET', KEYS[2], record, 'PX', ARGV[5])
if kept then
  return {1, 0}
end
local publish = ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
return {1, redis.call(publish, ARGV[2], record)}
