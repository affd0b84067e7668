-- rlock: KEYS as acquire's for a lock or a set (each name's sixth its readers); ARGV as
-- acquire's, ARGV[4] "0". Replies: {1, 0} a share of every name is ours (new, or renewed);
-- {0, pttl} a writer holds a name or a waiter goes first (pttl: the longest time left of
-- those names' holders, 0 if free); {-1, wait} the guard abstains; unguarded and ARGV[8] "1"
-- as acquire's.
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end
local token, waiter = ARGV[1], ARGV[5]
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, math.max(remaining(KEYS[1]), 0))
end
local names, list, wait, blocked = {}, '', 0, false
for j = 1, #KEYS, 6 do
  local n = keys_at(j)
  names[#names + 1], list = n, list .. ' ' .. #n.lock .. ' ' .. n.lock
  n.holder, n.queued = redis.call('GET', n.lock), redis.call('EXISTS', n.queue) == 1
  -- A share of this attempt or an earlier one of ours is ours, whatever the queue says.
  n.share = n.holder == readers_hold and own_share(n.readers, token)
  if n.holder and n.holder ~= readers_hold or not n.share and n.queued and ahead(n.queue, n.alive, n.waiters, waiter, tonumber(ARGV[6])) then
    blocked, wait = true, math.max(wait, remaining(n.lock)) -- a writer holds it, or a waiter goes first
  end
end
if blocked then
  queue_caller(names, ' r' .. (#names > 1 and list or ''))
  return vote(0, wait)
end
for _, n in ipairs(names) do
  if n.share then
    redis.call('ZREM', n.readers, n.share)
  end
  read_grant(n.lock, n.readers, token, ARGV[2], n.holder == readers_hold)
  if n.queued and waiter ~= '' then
    dequeue(n.queue, n.alive, n.waiters, waiter)
  end
end
return vote(1, 0, unguarded)
