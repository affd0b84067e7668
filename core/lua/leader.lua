-- leader: KEYS[1] lock, KEYS[2] election record ("<token> <value>"), read with EvalStrings.
-- Replies: {1, record} the record, whose token holds the lock; {0} no such record.
local record = redis.call('GET', KEYS[2])
local token = record and string.match(record, '^(%S+) ')
if not token or redis.call('GET', KEYS[1]) ~= token then
  return {0}
end
return {1, record}
