-- acquire (run after queue.lua): take the lock if it is free (or already ours) and no live
-- waiter queued before us, and advance the fence counter; otherwise queue us as a waiter.
-- KEYS[1] lock key, KEYS[2] fence counter key, KEYS[3] waiter queue (a sorted set: waiter
-- id by ticket), KEYS[4] waiter liveness (a sorted set: waiter id by deadline, server ms)
-- ARGV[1] our random token, ARGV[2] TTL in milliseconds,
-- ARGV[3] restart guard in whole seconds ("0": off),
-- ARGV[4] "0" to leave the fence counter alone (anything else: advance it),
-- ARGV[5] our waiter id ("": we do not wait, so we are never queued),
-- ARGV[6] our ticket: where we stand in the queue (smaller first, ties by waiter id),
-- ARGV[7] how long, in milliseconds, our place is kept unless we call again
-- Replies:
--   {1, fence}     the lock is ours: newly set, or already set with our token (a retry after
--                  a lost reply). fence is the counter, now max(counter + 1, server time in
--                  microseconds), so a node that lost its data does not start again from 1;
--                  0 when ARGV[4] is "0".
--   {1, fence, 1}  the same, but the guard was asked for and the server cannot report its
--                  uptime, so this node is not guarded.
--   {0, pttl}      another owner holds it: the longest this node can keep us waiting. We are
--                  queued (or our place is kept) if we gave a waiter id; a waiter that gets
--                  the lock stays queued, first, until its release takes it out.
--   {0, 0}         it is free, but a live waiter queued before us: its turn comes first.
--   {-1, wait}     the server started less than the guard ago, so it may have forgotten locks
--                  it granted before a restart: it abstains for wait more milliseconds.
local unguarded = false
local guard = tonumber(ARGV[3]) or 0
if guard > 0 then
  local info = redis.pcall('INFO', 'server')
  local uptime = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not uptime then
    unguarded = true
  elseif uptime <= guard then
    -- uptime_in_seconds is a difference of whole wall-clock seconds and can read one more
    -- than has passed: only uptime > guard proves that the guard's time has gone by.
    return {-1, (guard - uptime + 1) * 1000}
  end
end

local waiter, ticket, keep = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
-- queue keeps our place, or takes one, if we wait.
local function queue()
  if waiter ~= '' then
    enqueue(KEYS[3], KEYS[4], waiter, ARGV[6], keep)
  end
end

local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  queue()
  return {0, redis.call('PTTL', KEYS[1])}
end
if not holder then
  local head = first(KEYS[3], KEYS[4])
  if #head > 0 and head[1] ~= waiter then
    local score = tonumber(head[2])
    if waiter == '' or score < ticket or (score == ticket and head[1] < waiter) then
      queue()
      return {0, 0}
    end
  end
end
-- A waiter keeps its place while it holds the lock here: if its attempt fails on the other
-- nodes, it lets go of this one and is still first. Its release takes it out of the queue.
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local fence = 0
if ARGV[4] ~= '0' then
  local t = server_time()
  -- The microseconds as a decimal string: exact, and never printed in exponent form.
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local counter = redis.call('GET', KEYS[2])
  if counter and tonumber(counter) >= tonumber(now) then
    fence = redis.call('INCR', KEYS[2])
  else
    redis.call('SET', KEYS[2], now)
    fence = tonumber(now)
  end
end
if unguarded then
  return {1, fence, 1}
end
return {1, fence}
