-- release: KEYS[1] lock, KEYS[2] queue, KEYS[3] alive, KEYS[4] waiters, KEYS[5] fence counter,
-- KEYS[6] readers. ARGV[1] token ("": none), ARGV[2] wake channel prefix (a waiter's:
-- ARGV[2] .. ':' .. id), ARGV[3] "SPUBLISH" for sharded pub/sub, ARGV[4] waiter id ("":
-- none), ARGV[5] "leave" to leave the queue (else keep the place), ARGV[6] ticket and
-- ARGV[7] how long the place is kept (ms), to keep it.
-- Replies: {released, woken} released 1 if the lock was ours, woken how many heard a
-- hand-over ("<token> <fence>[ u]", or "": call again); {0, woken, 1} nothing of ours is
-- here and no other owner holds the lock.
local holder = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[2]) == 1
local waiter = ARGV[4]
-- Uncontended, and not a leave past a first attempt (remembered): done before the prelude.
local attempt_n = string.match(ARGV[1], '%.(%d+)$')
local retried = waiter ~= '' and attempt_n ~= nil and tonumber(attempt_n) > 1
if not queued and (waiter == '' or ARGV[5] == 'leave' and not retried) then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return {1, 0}
  elseif not holder then
    return {0, 0, 1}
  end
end
-- queue.lua: the prelude, put here by core/scripts.go
local released, absent = 0, not holder
if holder and ours(holder, ARGV[1]) then
  redis.call('DEL', KEYS[1])
  released, holder = 1, false
end
return settle(released, holder, queued, absent)
