-- release (read false) and runlock (read true: a reader's share; core/scripts.go sets read):
-- KEYS as acquire's. ARGV[1] token ("": none), ARGV[2] wake channel prefix (a
-- waiter's: ARGV[2] .. ':' .. id; a set's other names use their lock key's), ARGV[3]
-- "SPUBLISH" for sharded pub/sub, ARGV[4] waiter id ("": none), ARGV[5] "leave" to leave the
-- queue (else keep the place: ARGV[6] ticket, ARGV[7] for how long, ms), a semaphore's ARGV[8]
-- K and ARGV[9] "1" if KEYS[1] is its permit held. Replies: {released, woken} released 1 if
-- the lock (a name, a permit, a live share) was ours, woken how many heard a hand-over ("<token>
-- <fence>[ #<permit>][ u]", or "": call again); {0, woken, 1} nothing of ours is here and no
-- other owner holds the lock, or this release let go here before (its token is marked left).
local holder = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[3]) == 1
local waiter = ARGV[4]
-- Uncontended (no queue, not a leave past a first attempt), a writer's lock, every name of a
-- set or the permit held: done before the rest of the prelude.
local retried = waiter ~= '' and tonumber(string.match(ARGV[1], '%.(%d+)$') or '1') > 1
local uncontended = not queued and (waiter == '' or ARGV[5] == 'leave' and not retried)
local locks = not read and uncontended and (not ARGV[8] or ARGV[9]) and holder == ARGV[1] and {KEYS[1]}
if locks and not ARGV[8] then -- a set's other names: each ours, none queued
  for j = 7, #KEYS, 6 do
    if redis.call('GET', KEYS[j]) ~= ARGV[1] or redis.call('EXISTS', KEYS[j + 2]) == 1 then
      locks = nil
      break
    end
    locks[#locks + 1] = KEYS[j]
  end
end
if locks then
  redis.call('DEL', unpack(locks))
  return {1, 0}
elseif uncontended and not holder and (ARGV[8] and ARGV[9] or not ARGV[8] and #KEYS == 6) then
  return {0, 0, 1}
end
-- queue.lua: the rest of the prelude, put here by core/scripts.go
if ARGV[8] then -- every permit of the caller's goes; it hands on its own, or the first free
  local permits, released, pick, mine = {unpack(KEYS, 7)}, 0, nil, nil
  for i = #permits, 1, -1 do
    local h = redis.call('GET', permits[i])
    if h and ours(h, ARGV[1]) then
      redis.call('DEL', permits[i])
      released, h, mine = 1, false, i
    end
    pick = not h and i or pick
  end
  pick = mine or pick
  sem_lock, sem_index = pick and permits[pick], (pick or 1) - 1
  return settle(keys_at(1), released, pick == nil, queued, not holder)
end
return settle_each(function(k) -- a lock, or each name of a set
  if read then
    local released, holder, unwritten = read_release(k.lock, k.readers, ARGV[1])
    return released, holder, redis.call('EXISTS', k.queue) == 1, unwritten
  end
  local h = redis.call('GET', k.lock)
  local mine = h and ours(h, ARGV[1])
  if mine then
    redis.call('DEL', k.lock)
  end
  return mine and 1 or 0, h and not mine, redis.call('EXISTS', k.queue) == 1, not h
end)
