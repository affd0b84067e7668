-- queue: the prelude of the acquire and release scripts (core builds acquire as this text
-- followed by acquire.lua, and release as release_uncontended.lua, this text and
-- release.lua): the waiter queue, the restart guard, the fence counter and attempt
-- tokens.
--
-- A queue is two sorted sets and a hash: q holds waiter ids by ticket (the turn order,
-- smaller first, ties by id), a holds the same ids by the server time in milliseconds at
-- which each waiter's place lapses unless it calls again, and w maps each waiter id to its
-- latest attempt, "<token> <ttl ms> <fence> <guard s>[ r]" (fence: "0" for none, else the
-- attempt's floor for the counter, a decimal; " r" for a reader), so that a release can
-- hand the lock to the first waiter in its name.
--
-- Readers (see rlock.lua) hold a lock together: each has an entry in the readers key (a
-- sorted set of reader tokens by the server time in milliseconds at which the holding
-- ends), and while any does, the lock key holds readers_hold, with a TTL that covers every
-- entry. So a writer, which takes the lock key, finds it held, and no script but the
-- readers' needs to look at the readers key.
-- (Scripts replicate their effects, not themselves, by default since Redis 5: TIME is safe.)

-- fence_idle is how long, in milliseconds, a fence counter outlives the last acquisition
-- that advanced it (one hour; core.FenceIdle says why that keeps tokens increasing). Every
-- key the scripts write expires: none is left behind by names used once.
local fence_idle = 3600000

-- readers_hold is the lock key's value while readers hold the lock: no token has a '('.
local readers_hold = '(readers)'

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
  local field = type(info) == 'string' and string.match(info, 'uptime_in_seconds:(%d+)')
  local uptime = field and tonumber(field)
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

-- A waiter that left the queue (it gave up, or released the lock it got) never calls again,
-- but a call it sent before it left can land after its leave: held up on the way (a
-- partition that heals, a server that was stopped) while the leave went on another
-- connection. Such a call would queue a waiter that is gone, under its old ticket, at the
-- head, or take a free lock in its name: the lock would stand unused for a place's time or
-- a TTL. So a node remembers, for left_kept milliseconds, each waiter that left while the
-- queue existed, as the member '!' .. id of the liveness set a (by the server time at
-- which it is forgotten; no waiter id has a '!'), and refuses its later calls without
-- queueing it. A call held up longer than that is not caught.
local left_kept = 10000

-- gone reports whether waiter left the queue less than left_kept ago.
local function gone(a, waiter)
  local until_ms = redis.call('ZSCORE', a, '!' .. waiter)
  return until_ms ~= false and tonumber(until_ms) > now_ms()
end

-- forget marks waiter as left (see left_kept), and forgets whatever in a has lapsed: places
-- (first treats a place it cannot find as lapsed) and the marks of waiters that left
-- long enough ago.
local function forget(a, waiter)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', a, '-inf', now)
  redis.call('ZADD', a, string.format('%d', now + left_kept), '!' .. waiter)
  if redis.call('PTTL', a) < left_kept then
    redis.call('PEXPIRE', a, left_kept)
  end
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

-- vote returns an acquisition's reply {status, value}, with what ARGV[8] asks for (see
-- acquire.lua): the unguarded flag, and the server's run_id.
local function vote(status, value, unguarded)
  if ARGV[8] ~= '1' then
    if unguarded then
      return {status, value, 1}
    end
    return {status, value}
  end
  local r = {status, value, unguarded and 1 or 0}
  local info = redis.pcall('INFO', 'server')
  local id = type(info) == 'string' and string.match(info, 'run_id:(%x+)')
  if id and #id == 40 then
    for i = 1, 40, 10 do
      r[#r + 1] = tonumber(string.sub(id, i, i + 9), 16)
    end
  end
  return r
end

-- read_grant records that the reader with token holds the lock for ttl milliseconds (a
-- decimal string): its entry in r, and the lock key set to readers_hold for at least as
-- long (r too), so that a writer finds the lock held until the last reader's time is up.
-- held says whether the lock key holds readers_hold; otherwise it must be free, and then
-- no entry in r is live.
local function read_grant(lock, r, token, ttl, held)
  local ms = tonumber(ttl)
  redis.call('ZADD', r, string.format('%d', now_ms() + ms), token)
  if not held then
    redis.call('SET', lock, readers_hold, 'PX', ms)
    redis.call('PEXPIRE', r, ms)
    return
  end
  for _, k in ipairs({lock, r}) do
    if redis.call('PTTL', k) < ms then
      redis.call('PEXPIRE', k, ms)
    end
  end
end

-- own_share returns the live entry in r that token owns (its own, or an earlier attempt's
-- of its waiter, as ours says), or nil.
local function own_share(r, token)
  local now = now_ms()
  local _, n = attempt(token)
  if not (n and n > 1) then
    local score = redis.call('ZSCORE', r, token)
    if score and tonumber(score) > now then
      return token
    end
    return nil
  end
  local entries = redis.call('ZRANGE', r, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    if ours(entries[i], token) and tonumber(entries[i + 1]) > now then
      return entries[i]
    end
  end
  return nil
end

-- read_release deletes the readers' entries that token owns (its own, or an earlier
-- attempt's of its waiter, as ours says) and those whose time is up, and returns whether
-- token owned a live one (1 or 0), whether the lock is still held, by readers or a
-- writer, and whether no writer holds it. The lock key is freed once no live entry is
-- left, and otherwise kept for as long as the longest one.
local function read_release(lock, r, token)
  local released = 0
  local now = now_ms()
  local entries
  local _, n = attempt(token)
  if n and n > 1 then -- an earlier attempt of ours may hold an entry too
    entries = redis.call('ZRANGE', r, 0, -1, 'WITHSCORES')
  else
    local score = redis.call('ZSCORE', r, token)
    entries = score and {token, score} or {}
  end
  for i = 1, #entries, 2 do
    if ours(entries[i], token) then
      redis.call('ZREM', r, entries[i])
      if tonumber(entries[i + 1]) > now then
        released = 1
      end
    end
  end
  local holder = redis.call('GET', lock)
  if holder ~= readers_hold then
    return released, holder ~= false, not holder -- the entries left, if any, are out of time
  end
  local last = redis.call('ZRANGE', r, -1, -1, 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) <= now then
    redis.call('DEL', lock, r)
    return released, false, true
  end
  redis.call('ZREMRANGEBYSCORE', r, '-inf', now)
  redis.call('PEXPIRE', lock, tonumber(last[2]) - now)
  return released, true, true
end

-- hand_over gives the lock, which must be free, to the first live waiter in the queue,
-- unless that is waiter and it stays (it lets go after a failed attempt, and goes on
-- waiting): a writer's recorded attempt gets the lock key, its place lapsing with the lock,
-- and the fence advanced to the attempt's floor; a reader's gets a readers' entry, and so
-- does every reader queued right behind it, up to the next writer, each leaving the queue.
-- Each is told "<token> <fence>[ u]" on its channel (fence 0 for readers and attempts
-- without one; " u" if it asked for the restart guard and the server cannot report its
-- uptime), or "" if it recorded no attempt here or the restart guard abstains: then it
-- calls again. KEYS and ARGV are the release script's (see release_uncontended.lua). It
-- returns how many subscribers heard the messages.
local function hand_over(waiter, stays)
  local publish = 'PUBLISH'
  if ARGV[3] == 'SPUBLISH' then
    publish = 'SPUBLISH'
  end
  local woken = 0
  for i = 1, first_scan do
    local head = first(KEYS[2], KEYS[3], KEYS[4])
    if #head == 0 or (head[1] == waiter and stays) then
      return woken
    end
    local reg = redis.call('HGET', KEYS[4], head[1])
    local token, ttl, fenced, guard, mode
    if reg then
      token, ttl, fenced, guard, mode = string.match(reg, '^(%S+) (%d+) (%d+) (%d+)( ?r?)$')
    end
    local reader = mode == ' r'
    if i > 1 and not reader then
      return woken -- a writer waits for the readers handed the lock before it
    end
    local message = ''
    local abstain, unguarded
    if token then
      abstain, unguarded = guarded(tonumber(guard))
    end
    if token and not abstain and reader then
      read_grant(KEYS[1], KEYS[6], token, ttl, i > 1)
      dequeue(KEYS[2], KEYS[3], KEYS[4], head[1])
      message = token .. ' 0'
    elseif token and not abstain then
      redis.call('SET', KEYS[1], token, 'PX', ttl)
      holds(KEYS[3], head[1], ttl)
      local fence = 0
      if fenced ~= '0' then
        fence = advance(KEYS[5], fenced) -- to at least the waiter's floor, as its attempt would
      end
      message = token .. ' ' .. string.format('%d', fence)
    end
    if message ~= '' and unguarded then
      message = message .. ' u'
    end
    woken = woken + redis.call(publish, ARGV[2] .. ':' .. head[1], message)
    if not reader or message == '' then
      return woken
    end
  end
  return woken
end

-- settle ends a release (see release_uncontended.lua) once its own holding is dealt with:
-- released (0 or 1) says whether it let go of one, holder whether the lock is still held
-- (by anyone), queued whether the queue exists, absent (when released is 0) whether
-- nothing of ours is here and no other owner holds the lock either. It takes our waiter
-- out of the queue (ARGV[5] "leave", remembered as left_kept says where the queue exists
-- or the waiter is past its first attempt) or keeps its place (queueing it if it let go
-- of the lock), and hands a free lock over. A release that hands the lock over remembers,
-- as a leave does (see left_kept), that it let go (its waiter's, or else its token's,
-- mark): so the same release run again finds the lock gone, not taken. It returns the
-- script's reply.
local function settle(released, holder, queued, absent)
  local waiter = ARGV[4]
  local leave = ARGV[5] == 'leave'
  if released == 0 and not absent and queued and ARGV[1] ~= '' then
    absent = gone(KEYS[3], waiter ~= '' and waiter or ARGV[1])
  end
  if waiter ~= '' and leave then
    if queued then
      dequeue(KEYS[2], KEYS[3], KEYS[4], waiter)
    end
    -- Where no queue exists a leave is remembered only past the waiter's first attempt:
    -- only then can an earlier attempt's call land after it.
    local _, n = attempt(ARGV[1])
    if queued or (n and n > 1) then
      forget(KEYS[3], waiter)
    end
  elseif waiter ~= '' and released == 1 and not gone(KEYS[3], waiter) then
    enqueue(KEYS[2], KEYS[3], KEYS[4], waiter, ARGV[6], tonumber(ARGV[7]), nil)
    queued = true
  elseif waiter == '' and released == 1 and queued then
    forget(KEYS[3], ARGV[1])
  end
  local woken = 0
  if not holder and queued then
    woken = hand_over(waiter, not leave)
  end
  if released == 0 and absent then
    return {0, woken, 1}
  end
  return {released, woken}
end
