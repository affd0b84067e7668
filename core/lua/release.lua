-- release: KEYS[1] lock, KEYS[2] queue, KEYS[3] alive, KEYS[4] waiters, KEYS[5] fence counter,
-- KEYS[6] readers, and a semaphore's KEYS[7] .. KEYS[6 + K] permits. ARGV[1] token ("": none),
-- ARGV[2] wake channel prefix (a waiter's: ARGV[2] .. ':' .. id), ARGV[3] "SPUBLISH" for sharded
-- pub/sub, ARGV[4] waiter id ("": none), ARGV[5] "leave" to leave the queue (else keep the
-- place: ARGV[6] ticket, ARGV[7] for how long, ms), a semaphore's ARGV[8] K and ARGV[9] "1" if
-- KEYS[1] is its permit held. Replies: {released, woken} released 1 if the lock was ours, woken
-- how many heard a hand-over ("<token> <fence>[ #<permit>][ u]", or "": call again);
-- {0, woken, 1} nothing of ours is here and no other owner holds the lock.
local holder = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[2]) == 1
local waiter = ARGV[4]
-- Uncontended, KEYS[1] known, not a leave past a first attempt: done before the prelude.
local retried = waiter ~= '' and tonumber(string.match(ARGV[1], '%.(%d+)$') or '1') > 1
if not queued and (not ARGV[8] or ARGV[9]) and (waiter == '' or ARGV[5] == 'leave' and not retried) then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return {1, 0}
  elseif not holder then
    return {0, 0, 1}
  end
end
-- queue.lua: the prelude, put here by core/scripts.go
-- A semaphore's: every permit of the caller's goes; it hands on its own, or the first free.
local permits = ARGV[8] and {unpack(KEYS, 7)} or {KEYS[1]}
local released, absent, pick, mine = 0, not holder, nil, nil
for i = #permits, 1, -1 do
  local h = holder
  if ARGV[8] then
    h = redis.call('GET', permits[i])
  end
  if h and ours(h, ARGV[1]) then
    redis.call('DEL', permits[i])
    released, h, mine = 1, false, i
  end
  pick = not h and i or pick
end
pick = mine or pick
sem_lock, sem_index = ARGV[8] and pick and permits[pick], (pick or 1) - 1
return settle(keys_of(), released, pick == nil, queued, absent)
