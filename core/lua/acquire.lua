-- acquire: KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] alive, KEYS[5] waiters,
-- and a semaphore's KEYS[6] record of K, KEYS[7] .. KEYS[6 + K] permits. ARGV[1] token, ARGV[2]
-- TTL ms, ARGV[3] restart guard s ("0": off), ARGV[4] fence floor ("0": no fence, "1": any),
-- ARGV[5] waiter id ("": does not wait), ARGV[6] ticket, ARGV[7] how long the place is kept
-- (ms), ARGV[8] "1": say which server this is; a semaphore's ARGV[9] K, ARGV[10] hinted permit.
-- Replies {status, value[, unguarded, run_id as four numbers of 10 hex digits][, free, permit]}:
-- {1, fence} taken (fence 0 without one); {0, pttl} held (-1: no expiry); {0, 0} free, a waiter
-- goes first; {-1, wait} the guard abstains for wait ms; {-2, n} the record says n permits.
-- unguarded (1: the guard was asked for, no uptime reported) is there if 1, if ARGV[8] is "1"
-- (then with the run_id), and in a semaphore's {1, ...} and {0, ...}, which end with the permits
-- free to the caller (ceil(K / 48) numbers, permit i bit i % 48 of number i / 48, from 0) and the
-- permit taken (-1: none).
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end
local token, waiter, k = ARGV[1], ARGV[5], tonumber(ARGV[9])
local permits, index = {KEYS[1]}, nil -- index: a semaphore's permit taken (-1: none)
local recorded = k and redis.call('GET', KEYS[6])
if recorded and recorded ~= ARGV[9] then
  return {-2, tonumber(recorded) or -1}
elseif k then
  redis.call('SET', KEYS[6], ARGV[9], 'PX', fence_idle)
  permits, index = {unpack(KEYS, 7)}, -1
end
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, soonest(permits), nil, index)
end
-- No one waits: a free lock is taken in one call.
local taken = not k and redis.call('EXISTS', KEYS[3]) == 0 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2])
local free = {} -- a semaphore's permits free to the caller
if not taken then
  local holders, pick = {}, nil
  for i = 1, #permits do
    holders[i] = redis.call('GET', permits[i]) -- WRONGTYPE for a key of another type
    if holders[i] and ours(holders[i], token) then -- an earlier attempt's, or this one resent
      pick, free[#free + 1] = i, i
      break
    end
    free[#free + 1] = not holders[i] and i or nil
  end
  if not pick and (#free == 0 or ahead(KEYS[3], KEYS[4], KEYS[5], waiter, tonumber(ARGV[6]), #free)) then
    queue_caller(false) -- held, or free for the live waiters ahead
    return vote(0, #free == 0 and soonest(permits) or 0, nil, index)
  end
  local hint = tonumber(ARGV[10])
  pick = pick or (hint and hint >= 0 and hint < #permits and not holders[hint + 1]) and hint + 1 or free[1]
  redis.call('SET', permits[pick], token, 'PX', ARGV[2])
  if not k then
    holds(KEYS[4], waiter, ARGV[2])
  elseif waiter ~= '' then
    dequeue(KEYS[3], KEYS[4], KEYS[5], waiter) -- a permit's holder does not queue
  end
  index = k and pick - 1
end
local fence = ARGV[4] ~= '0' and advance(KEYS[2], ARGV[4]) or 0
return vote(1, fence, unguarded, index, free)
