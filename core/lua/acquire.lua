-- acquire: KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] alive, KEYS[5] waiters;
-- a semaphore's KEYS[6] its record of K and KEYS[7] .. KEYS[6 + K] its permits.
-- ARGV[1] token, ARGV[2] TTL ms, ARGV[3] restart guard s ("0": off), ARGV[4] fence floor
-- ("0": no fence, "1": any), ARGV[5] waiter id ("": does not wait), ARGV[6] ticket,
-- ARGV[7] how long the place is kept (ms), ARGV[8] "1" to say which server this is; a
-- semaphore's ARGV[9] K and ARGV[10] the permit it hints at ("": none).
-- Replies: {1, fence} taken (fence 0 without one); {1, fence, 1} taken, the guard asked for
-- but no uptime reported; {0, pttl} held by another (-1: no expiry); {0, 0} free, a waiter
-- goes first; {-1, wait} the guard abstains for wait ms. With ARGV[8] "1" each reply has a
-- third element (1: unguarded, else 0) and the run_id as four numbers of 10 hex digits. A
-- semaphore's replies have the third element and then the permit taken last (-1: none);
-- {-2, n} its record says n permits.
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end
local token, waiter, k = ARGV[1], ARGV[5], tonumber(ARGV[9])
local permits, index = {KEYS[1]}, nil -- index: a semaphore's permit taken (-1: none)
if k then
  local n = redis.call('GET', KEYS[6])
  if n and n ~= ARGV[9] then
    return {-2, tonumber(n) or -1}
  end
  redis.call('SET', KEYS[6], ARGV[9], 'PX', fence_idle)
  permits, index = {unpack(KEYS, 7)}, -1
end
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, soonest(permits), nil, index)
end
-- No one waits: a free lock is taken in one call.
local taken = not k and redis.call('EXISTS', KEYS[3]) == 0 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2])
if not taken then
  local holders, free, pick = redis.call('MGET', unpack(permits)), {}, nil
  for i = 1, #permits do
    if holders[i] and ours(holders[i], token) then -- an earlier attempt's, or this one resent
      pick = i
      break
    end
    free[#free + 1] = not holders[i] and i or nil
  end
  if not pick and #free == 0 then
    queue_caller(false)
    return vote(0, soonest(permits), nil, index)
  end
  if not pick and ahead(KEYS[3], KEYS[4], KEYS[5], waiter, tonumber(ARGV[6]), #free) then
    queue_caller(false)
    return vote(0, 0, nil, index)
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
return vote(1, fence, unguarded, index)
