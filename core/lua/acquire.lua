-- acquire (after the prelude queue.lua): take the lock if it is free (or already ours) and no live
-- waiter queued before us, and advance the fence counter; otherwise queue us as a waiter.
-- KEYS[1] lock key, KEYS[2] fence counter key, KEYS[3] waiter queue (a sorted set: waiter
-- id by ticket), KEYS[4] waiter liveness (a sorted set: waiter id by deadline, server ms),
-- KEYS[5] the waiters' latest attempts (a hash: waiter id to attempt, see queue.lua)
-- ARGV[1] our random token; a waiter's is "<waiter id>.<attempt number>", and then a lock
--         held by an earlier attempt of ours counts as ours,
-- ARGV[2] TTL in milliseconds,
-- ARGV[3] restart guard in whole seconds ("0": off),
-- ARGV[4] "0" to leave the fence counter alone; otherwise advance it, to at least this
--         number (a decimal; "1" asks for no more than an advance),
-- ARGV[5] our waiter id ("": we do not wait, so we are never queued),
-- ARGV[6] our ticket: where we stand in the queue (smaller first, ties by waiter id),
-- ARGV[7] how long, in milliseconds, our place is kept unless we call again,
-- ARGV[8] "1" to have the server say which it is (optional; see the replies)
-- Replies:
--   {1, fence}     the lock is ours: newly set, or already set with our token (a retry after
--                  a lost reply, or a release handed it to us). fence is the counter, now
--                  max(counter + 1, server time in microseconds, ARGV[4]), so a node that
--                  lost its data does not start again from 1; 0 when ARGV[4] is "0".
--   {1, fence, 1}  the same, but the guard was asked for and the server cannot report its
--                  uptime, so this node is not guarded.
--   {0, pttl}      another owner holds it: the longest this node can keep us waiting (at
--                  least 1, or -1 if the key has no expiry: not a key of ours). We are
--                  queued (or our place is kept) if we gave a waiter id, and a release hands
--                  the lock to the first waiter (see release); a waiter that gets the lock
--                  stays queued, first, until its release takes it out or its place lapses
--                  with the lock's TTL.
--   {0, 0}         it is free, but a live waiter queued before us: its turn comes first.
--                  Also {0, pttl} or {0, 0}, with nothing changed, to a call of a waiter
--                  that has left the queue (a call that landed after the leave: see
--                  left_kept in queue.lua).
--   {-1, wait}     the server started less than the guard ago, so it may have forgotten locks
--                  it granted before a restart: it abstains for wait more milliseconds.
-- With ARGV[8] = "1", every reply has a third element (1 if unguarded as above, else 0),
-- followed by the server's run_id (random per server process) as four numbers of 10 hex
-- digits each, if the server reports one: so that the client can tell that two of its
-- nodes reach one server, and count it once.

local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end

local token, waiter, ticket, keep = ARGV[1], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
-- A call of a waiter that has left, landing late (see left_kept): refused, and nothing
-- changes.
if waiter ~= '' and gone(KEYS[4], waiter) then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl == 0 then
    pttl = 1
  elseif pttl == -2 then
    pttl = 0
  end
  return vote(0, pttl)
end
-- queue keeps our place, or takes one, if we wait.
local function queue()
  if waiter ~= '' then
    -- The fence floor goes with the attempt, so that a release that hands it the lock
    -- advances the counter to it (see release).
    local fence = string.match(ARGV[4], '^%d+$') or '1'
    local reg = token .. ' ' .. ARGV[2] .. ' ' .. fence .. ' ' .. (tonumber(ARGV[3]) or 0)
    enqueue(KEYS[3], KEYS[4], KEYS[5], waiter, ARGV[6], keep, reg)
  end
end

-- No one waits (the common, uncontended case): a free lock is ours in one call.
local taken = redis.call('EXISTS', KEYS[3]) == 0 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2])
if not taken then
  local holder = redis.call('GET', KEYS[1])
  if holder and not ours(holder, token) then
    queue()
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl == 0 then
      pttl = 1 -- a key in its last millisecond reads 0: it is held for up to 1 ms more
    end
    return vote(0, pttl)
  end
  if not holder then
    local head = first(KEYS[3], KEYS[4], KEYS[5])
    if #head > 0 and head[1] ~= waiter then
      local score = tonumber(head[2])
      if waiter == '' or score < ticket or (score == ticket and head[1] < waiter) then
        queue()
        return vote(0, 0)
      end
    end
  end
  -- A waiter keeps its place while it holds the lock here: if its attempt fails on the
  -- other nodes, it lets go of this one and is still first. Its release takes it out of
  -- the queue; if it never comes, the place lapses with the lock.
  redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
  holds(KEYS[4], waiter, ARGV[2])
end
local fence = 0
if ARGV[4] ~= '0' then
  fence = advance(KEYS[2], ARGV[4])
end
return vote(1, fence, unguarded)
