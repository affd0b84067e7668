-- release: KEYS[1] lock, KEYS[2] queue, KEYS[3] alive, KEYS[4] waiters, KEYS[5] fence counter,
-- KEYS[6] readers. ARGV[1] token ("": none), ARGV[2] wake channel prefix (a waiter's:
-- ARGV[2] .. ':' .. id), ARGV[3] "SPUBLISH" for sharded pub/sub, ARGV[4] waiter id ("":
-- none), ARGV[5] "leave" to leave the queue (else keep the place), ARGV[6] ticket and
-- ARGV[7] how long the place is kept (ms), to keep it; a semaphore's ARGV[8] K, with
-- KEYS[1] the permit it holds (any if it does not know) and KEYS[7] .. KEYS[6 + K] its permits.
-- Replies: {released, woken} released 1 if the lock was ours, woken how many heard a
-- hand-over ("<token> <fence>[ #<permit>][ u]", or "": call again); {0, woken, 1} nothing of ours is
-- here and no other owner holds the lock.
local holder = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[2]) == 1
local waiter = ARGV[4]
-- Uncontended, not a semaphore's, not a leave past a first attempt: done before the prelude.
local attempt_n = string.match(ARGV[1], '%.(%d+)$')
local retried = waiter ~= '' and attempt_n ~= nil and tonumber(attempt_n) > 1
if not queued and not ARGV[8] and (waiter == '' or ARGV[5] == 'leave' and not retried) then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return {1, 0}
  elseif not holder then
    return {0, 0, 1}
  end
end
-- queue.lua: the prelude, put here by core/scripts.go
-- A semaphore's release lets go of every permit of the caller's here, and hands one on (its
-- own, else the first free one), saying "#<index>" after the fence.
local permits, holders = {KEYS[1]}, {holder}
if ARGV[8] then
  permits = {unpack(KEYS, 7)}
  holders = redis.call('MGET', unpack(permits))
end
local released, absent, pick, mine = 0, not holder, nil, nil
for i = #permits, 1, -1 do
  if holders[i] and ours(holders[i], ARGV[1]) then
    redis.call('DEL', permits[i])
    released, holders[i], mine = 1, false, i
  end
  pick = not holders[i] and i or pick
end
pick = mine or pick
if ARGV[8] and pick then
  sem_lock, sem_index = permits[pick], pick - 1
end
return settle(released, pick == nil, queued, absent)
