-- acquire (read false) and rlock (read true: a reader's share; core/scripts.go sets read): a
-- lock's six KEYS: lock, fence counter, queue, alive, waiters, readers; a set's: each
-- name's six, name after name; a semaphore's: those of its queue, with its record of K
-- sixth, then KEYS[7] .. KEYS[6 + K] its permits. ARGV[1] token, ARGV[2] TTL ms, ARGV[3]
-- restart guard s ("0": off), ARGV[4] fence floor ("0": no fence, "1": any; a reader's "0"),
-- ARGV[5] waiter id ("": does not wait), ARGV[6] ticket, ARGV[7] how long the place is kept
-- (ms), ARGV[8] "1": say which server this is; a semaphore's ARGV[9] K, ARGV[10] hinted permit.
-- Replies {status, value[, unguarded, run_id as four numbers of 10 hex digits][, free, permit]}:
-- {1, fence} taken (a reader: a share of), every name of a set (fence 0 without one); {0,
-- pttl} held (-1: no expiry); {0, 0} free, a waiter goes first; {-1, wait} the guard abstains
-- for wait ms; {-2, n} the record says n permits; the error NOUPTIME <why> if the guard was
-- asked for and the server refuses its uptime (see info_refused). unguarded (1: the guard was
-- asked for, and the server is known to report no uptime; 2: ARGV[8] is "1", and the server
-- refuses the INFO that says which it is) is there if not 0, if ARGV[8] is "1" (then with
-- the run_id), and in a
-- semaphore's {1, ...} and {0, ...}, which end with the permits free to the caller (ceil(K /
-- 48) numbers, permit i bit i % 48 of number i / 48, from 0) and the permit taken (-1: none).
-- The first case, before the rest of the prelude: no fence, semaphore or identity asked for,
-- the restart guard (if any) passed, and every name free with no one queued or remembered as
-- leaving there: all taken in one call.
local abstain, unguarded, refused = guarded(tonumber(ARGV[3]) or 0)
if refused then -- the guard is asked for and the server will not say its uptime: no vote
  return redis.error_reply('NOUPTIME ' .. refused)
end
if not read and not abstain and not unguarded and ARGV[4] == '0' and not ARGV[9] and ARGV[8] ~= '1' then
  local watched = {}
  for j = 1, #KEYS, 6 do
    watched[#watched + 1], watched[#watched + 2], watched[#watched + 3] = KEYS[j], KEYS[j + 2], KEYS[j + 3]
  end
  if redis.call('EXISTS', unpack(watched)) == 0 then
    for j = 1, #KEYS, 6 do
      redis.call('SET', KEYS[j], ARGV[1], 'PX', ARGV[2])
    end
    return {1, 0}
  end
end
-- queue.lua: the rest of the prelude, put here by core/scripts.go
if abstain then
  return vote(-1, abstain)
end
local token, waiter, k = ARGV[1], ARGV[5], tonumber(ARGV[9])
-- in_use reports whether a semaphore's record of n permits (nil: not a count) stands: a
-- permit of n or of the caller's K is held here, or a waiter's place is live (a scan that
-- runs out reads as one). It changes nothing, and reads no more keys than the acquisitions
-- that recorded n passed.
local function in_use(n)
  if not n then
    return true
  end
  local base, keys = string.match(KEYS[7], '^(.*/)0$'), {}
  for i = 0, math.max(n, k) - 1 do
    keys[#keys + 1] = base .. i
    if #keys == 256 or i == math.max(n, k) - 1 then -- a bounded unpack
      if redis.call('EXISTS', unpack(keys)) > 0 then
        return true
      end
      keys = {}
    end
  end
  local queued, now = redis.call('ZRANGE', KEYS[3], 0, first_scan - 1), now_ms()
  for _, id in ipairs(queued) do
    if tonumber(redis.call('ZSCORE', KEYS[4], id) or 0) > now then
      return true
    end
  end
  return #queued == first_scan
end
local recorded = k and redis.call('GET', KEYS[6])
if recorded and recorded ~= ARGV[9] and in_use(string.match(recorded, '^%d+$') and tonumber(recorded)) then
  return {-2, tonumber(recorded) or -1}
elseif k then
  redis.call('SET', KEYS[6], ARGV[9], 'PX', fence_idle)
end
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, soonest(k and {unpack(KEYS, 7)} or {KEYS[1]}), nil, k and -1)
elseif not k and not read and #KEYS == 6 and redis.call('EXISTS', KEYS[3]) == 0 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
  return vote(1, ARGV[4] ~= '0' and advance(KEYS[2], ARGV[4]) or 0, unguarded) -- one name, no one waits: one call
elseif not k then -- a lock, or every name of a set: all or none
  local names, list, wait, blocked = {}, '', 0, false
  for j = 1, #KEYS, 6 do
    local n = keys_at(j)
    names[#names + 1], list = n, list .. ' ' .. #n.lock .. ' ' .. n.lock
    n.holder, n.queued = redis.call('GET', n.lock), redis.call('EXISTS', n.queue) == 1
    local other = n.holder and not (read and n.holder == readers_hold or not read and ours(n.holder, token))
    -- A holding (a share) of this attempt or an earlier one of ours is ours, whatever the queue says.
    n.share = read and n.holder == readers_hold and own_share(n.readers, token)
    local own = n.share or not read and n.holder and not other
    if other or not own and n.queued and ahead(n.queue, n.alive, n.waiters, waiter, tonumber(ARGV[6])) then
      local r = remaining(n.lock) -- held by another, or a waiter goes first (0 if free)
      blocked, wait = true, (wait < 0 or r < 0) and -1 or math.max(wait, r)
    end
  end
  if blocked then
    queue_caller(names, (read and ' r' or #names > 1 and ' s' or '') .. (#names > 1 and list or ''))
    return vote(0, wait)
  elseif not read then
    return vote(1, take_set(names, waiter, token, ARGV[2], ARGV[4]), unguarded)
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
end
local permits, free, holders, pick = {unpack(KEYS, 7)}, {}, {}, nil
for i = 1, #permits do
  holders[i] = redis.call('GET', permits[i]) -- WRONGTYPE for a key of another type
  local own = holders[i] and ours(holders[i], token) -- an earlier attempt's, or this one resent
  pick = pick or own and i or nil
  free[#free + 1] = (own or not holders[i]) and i or nil
end
if not pick and (#free == 0 or ahead(KEYS[3], KEYS[4], KEYS[5], waiter, tonumber(ARGV[6]), #free)) then
  queue_caller({keys_at(1)}, '') -- held, or free for the live waiters ahead
  return vote(0, #free == 0 and soonest(permits) or 0, nil, -1)
end
local hint = tonumber(ARGV[10])
pick = pick or (hint and hint >= 0 and hint < #permits and not holders[hint + 1]) and hint + 1 or free[1]
redis.call('SET', permits[pick], token, 'PX', ARGV[2])
if waiter ~= '' then
  dequeue(KEYS[3], KEYS[4], KEYS[5], waiter) -- a permit's holder does not queue
end
return vote(1, ARGV[4] ~= '0' and advance(KEYS[2], ARGV[4]) or 0, unguarded, pick - 1, free)
