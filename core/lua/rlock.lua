-- rlock: KEYS as acquire's (KEYS[2] unused) and KEYS[6] readers; ARGV as acquire's, ARGV[4] "0".
-- Replies: {1, 0} a share is ours (new, or renewed); {0, pttl} a writer holds the lock or a
-- waiter goes first (pttl: the holder's time left, 0 if free); {-1, wait} the guard
-- abstains; unguarded and ARGV[8] "1" as acquire's.
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end
local token, waiter = ARGV[1], ARGV[5]
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, math.max(remaining(KEYS[1]), 0))
end
local holder = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[3]) == 1
-- A share of this attempt or an earlier one of ours is ours, whatever the queue says.
local share = holder == readers_hold and own_share(KEYS[6], token)
if holder and holder ~= readers_hold or not share and queued and ahead(KEYS[3], KEYS[4], KEYS[5], waiter, tonumber(ARGV[6])) then
  queue_caller({keys_at(1)}, ' r') -- a writer holds the lock, or a waiter goes first
  return vote(0, math.max(remaining(KEYS[1]), 0))
elseif share then
  redis.call('ZREM', KEYS[6], share)
end
read_grant(KEYS[1], KEYS[6], token, ARGV[2], holder == readers_hold)
if queued and waiter ~= '' then
  dequeue(KEYS[3], KEYS[4], KEYS[5], waiter)
end
return vote(1, 0, unguarded)
