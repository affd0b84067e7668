-- proclaim: KEYS[1] lock, KEYS[2] election record; ARGV[1] token, ARGV[2] channel, ARGV[3]
-- "SPUBLISH" for sharded pub/sub, ARGV[4] value, ARGV[5] how long the record is kept (ms).
-- Replies: {1, heard} recorded, heard: how many subscribers heard "<token> <value>"; {0} the
-- lock is not ours here (nothing changed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local record = ARGV[1] .. ' ' .. ARGV[4]
redis.call('SET', KEYS[2], record, 'PX', ARGV[5])
local publish = ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
return {1, redis.call(publish, ARGV[2], record)}
