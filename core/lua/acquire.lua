-- acquire: KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] alive, KEYS[5] waiters.
-- ARGV[1] token, ARGV[2] TTL ms, ARGV[3] restart guard s ("0": off), ARGV[4] fence floor
-- ("0": no fence, "1": any), ARGV[5] waiter id ("": does not wait), ARGV[6] ticket,
-- ARGV[7] how long the place is kept (ms), ARGV[8] "1" to say which server this is.
-- Replies: {1, fence} taken (fence 0 without one); {1, fence, 1} taken, the guard asked for
-- but no uptime reported; {0, pttl} held by another (-1: no expiry); {0, 0} free, a waiter
-- goes first; {-1, wait} the guard abstains for wait ms. With ARGV[8] "1" each reply has a
-- third element (1: unguarded, else 0) and the run_id as four numbers of 10 hex digits.
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end
local token, waiter = ARGV[1], ARGV[5]
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, remaining(KEYS[1]))
end
-- No one waits: a free lock is taken in one call.
local taken = redis.call('EXISTS', KEYS[3]) == 0 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2])
if not taken then
  local holder = redis.call('GET', KEYS[1])
  if holder and not ours(holder, token) then
    queue_caller(false)
    return vote(0, remaining(KEYS[1]))
  end
  if not holder and ahead(KEYS[3], KEYS[4], KEYS[5], waiter, tonumber(ARGV[6])) then
    queue_caller(false)
    return vote(0, 0)
  end
  redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
  holds(KEYS[4], waiter, ARGV[2])
end
local fence = ARGV[4] ~= '0' and advance(KEYS[2], ARGV[4]) or 0
return vote(1, fence, unguarded)
