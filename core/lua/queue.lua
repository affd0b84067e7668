-- queue: the prelude of the acquire and release scripts (core builds acquire as this text
-- followed by acquire.lua, and release as release_uncontended.lua, this text and
-- release.lua): the waiter queue, the restart guard, the fence counter and attempt
-- tokens.
--
-- A queue is two sorted sets and a hash: q holds waiter ids by ticket (the turn order,
-- smaller first, ties by id), a holds the same ids by the server time in milliseconds at
-- which each waiter's place lapses unless it calls again, and w maps each waiter id to its
-- latest attempt, "<token> <ttl ms> <fence> <guard s>" (fence: "0" for none, else the
-- attempt's floor for the counter, a decimal), so that a release can hand the lock to the
-- first waiter in its name.
-- (Scripts replicate their effects, not themselves, by default since Redis 5: TIME is safe.)

-- fence_idle is how long, in milliseconds, a fence counter outlives the last acquisition
-- that advanced it (one hour; core.FenceIdle says why that keeps tokens increasing). Every
-- key the scripts write expires: none is left behind by names used once.
local fence_idle = 3600000

local clock -- the server's TIME, read once when first needed
local function server_time()
  clock = clock or redis.call('TIME')
  return clock
end

local function now_ms()
  local t = server_time()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- attempt splits a waiter's token "<waiter id>.<attempt>" into the id and the attempt
-- number; any other token gives nil: it matches only itself.
local function attempt(token)
  local id, n = string.match(token, '^(.+)%.(%d+)$')
  if id then
    return id, tonumber(n)
  end
end

-- ours reports whether holder is token, or an earlier attempt of token's waiter (a
-- straggler's grant, or the lock handed to an attempt that has since been superseded).
local function ours(holder, token)
  if holder == token then
    return true
  end
  local id, n = attempt(token)
  local hid, hn = attempt(holder)
  return id ~= nil and id == hid and hn <= n
end

-- guarded checks the restart guard of guard seconds (0: off). It returns the milliseconds to
-- abstain for if the server started less than the guard ago (it may have forgotten locks it
-- granted before a restart), else nil, and then whether the server could not report its
-- uptime (the node is not guarded).
local function guarded(guard)
  if guard <= 0 then
    return nil, false
  end
  local info = redis.pcall('INFO', 'server')
  local uptime = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not uptime then
    return nil, true
  end
  if uptime <= guard then
    -- uptime_in_seconds is a difference of whole wall-clock seconds and can read one more
    -- than has passed: only uptime > guard proves that the guard's time has gone by.
    return (guard - uptime + 1) * 1000, false
  end
  return nil, false
end

-- advance advances the fence counter f and returns it: max(counter + 1, server time in
-- microseconds, floor), so that a node that lost its data does not start again from 1, and
-- so that the nodes given one floor agree on it where their counters are below it. floor
-- is a decimal string, or nil; it counts for at most floor_cap past the server's clock, so
-- that a client whose clock runs fast cannot push the counters further ahead of the
-- servers' time than the restart guard outlasts. The counter expires after fence_idle
-- without an acquisition (see fence_idle).
local floor_cap = 2000000
local function advance(f, floor)
  local t = server_time()
  -- The microseconds as a decimal string: exact, and never printed in exponent form.
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local proposed = floor and tonumber(floor)
  if proposed and proposed > tonumber(now) then
    now = string.format('%d', math.min(proposed, tonumber(now) + floor_cap))
  end
  local counter = redis.call('GET', f)
  if counter and tonumber(counter) >= tonumber(now) then
    counter = redis.call('INCR', f)
    redis.call('PEXPIRE', f, fence_idle)
    return counter
  end
  redis.call('SET', f, now, 'PX', fence_idle)
  return tonumber(now)
end

-- enqueue puts waiter in the queue at ticket (a decimal string: Lua would print a 16-digit
-- number in exponent form, inexactly), or keeps its place, for keep more milliseconds, and
-- records its attempt (reg, or nothing if reg is nil) unless a later one is recorded. Each
-- of the three keys expires when no one calls, but never before a place it keeps: a call
-- that finds one expiring sooner (or not at all: just made) gives it two places' time, so
-- that the calls in between need not.
local function enqueue(q, a, w, waiter, ticket, keep, reg)
  redis.call('ZADD', q, ticket, waiter)
  redis.call('ZADD', a, string.format('%d', now_ms() + keep), waiter)
  if reg then
    local old = redis.call('HGET', w, waiter)
    local _, n = attempt(string.match(reg, '^%S+'))
    local _, m = attempt(old and string.match(old, '^%S+') or '')
    if not (n and m and m > n) then
      redis.call('HSET', w, waiter, reg)
    end
  end
  for _, k in ipairs({q, a, w}) do
    local pttl = redis.call('PTTL', k)
    if pttl ~= -2 and pttl < keep then
      redis.call('PEXPIRE', k, 2 * keep)
    end
  end
end

-- holds marks that waiter holds the lock for ttl milliseconds from now: if it is queued, its
-- place lapses when the lock does (or at its next call), so that a holder that crashed
-- blocks the waiters behind it no longer than its lock's TTL.
local function holds(a, waiter, ttl)
  if waiter ~= '' then
    redis.call('ZADD', a, 'XX', string.format('%d', now_ms() + tonumber(ttl)), waiter)
  end
end

local function dequeue(q, a, w, waiter)
  redis.call('ZREM', q, waiter)
  redis.call('ZREM', a, waiter)
  redis.call('HDEL', w, waiter)
end

-- first forgets the waiters at the head of the queue whose place lapsed (at most
-- first_scan of them per call: the queue's keys expire if no one calls, so none piles up)
-- and returns the first live one as {id, ticket}, or an empty table if none is queued or
-- the scan ran out.
local first_scan = 64
local function first(q, a, w)
  local now
  for _ = 1, first_scan do
    local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    if #head == 0 then
      return head
    end
    local lapses = redis.call('ZSCORE', a, head[1])
    now = now or now_ms()
    if lapses and tonumber(lapses) > now then
      return head
    end
    dequeue(q, a, w, head[1])
  end
  return {}
end
