-- The prelude of every script but proclaim and leader: constants and shared
-- functions. q, a, w are a lock's queue, liveness and attempts keys; r its readers key.
-- acquire and release run their first case between its head and its rest (see
-- core/scripts.go).
local fence_idle = 3600000 -- core.FenceIdle in ms
local readers_hold = '(readers)' -- the lock key's value while readers hold it
local floor_cap = 2000000 -- how far a fence floor counts past the server's clock, in us
local left_kept = 10000 -- how long a leave is remembered in a, as '!' .. id, in ms
local first_scan = 64 -- the most lapsed waiters forgotten per call

local sem_lock, sem_index -- set by a semaphore's release: the permit that hand_over hands on
local clock, info -- the server's TIME and INFO server, each read once when first needed
local function server_info(pattern)
  info = info or redis.pcall('INFO', 'server')
  return type(info) == 'string' and string.match(info, pattern)
end
-- info_refused returns why the server gives no uptime (its error for INFO server, an ACL's
-- say), or nil if it gives one or is known to have none to give (miniredis: "section
-- (server) is not supported").
local function info_refused()
  if server_info('uptime_in_seconds:(%d+)') then
    return nil
  elseif type(info) == 'table' then
    local err = tostring(info.err or info)
    return not string.find(err, '^section %(server%) is not supported') and err or nil
  end
  return 'INFO server replied without uptime_in_seconds'
end
-- guarded returns the ms to abstain for under a restart guard of guard s (0: off), else nil;
-- then whether the server reports no uptime and is known to have none; then, if it could
-- and does not (info_refused), why: the guard then abstains (0, which Lua reads as true).
local function guarded(guard)
  local uptime = guard > 0 and tonumber(server_info('uptime_in_seconds:(%d+)') or '')
  if not uptime then
    local refused = guard > 0 and info_refused()
    return refused and 0 or nil, guard > 0 and not refused, refused
  end
  return uptime <= guard and (guard - uptime + 1) * 1000 or nil, false -- only uptime > guard proves it
end
-- The rest of the prelude.
local function server_time()
  clock = clock or redis.call('TIME')
  return clock
end
local function now_ms()
  local t = server_time()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- attempt splits "<waiter id>.<attempt>" into the id and the number; nil for other tokens.
local function attempt(token)
  local id, n = string.match(token, '^(.+)%.(%d+)$')
  return id, n and tonumber(n)
end
-- ours reports whether holder is token or an earlier attempt of token's waiter.
local function ours(holder, token)
  local id, n = attempt(token)
  local hid, hn = attempt(holder)
  return holder == token or (id ~= nil and id == hid and hn <= n)
end
-- advance sets the fence counter f to max(counter + 1, server time in us, floor) and returns it.
local function advance(f, floor)
  local t = server_time()
  local now = t[1] .. string.format('%06d', tonumber(t[2])) -- a decimal string: exact
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
-- enqueue queues waiter at ticket (a decimal string), or keeps its place, for keep ms, and
-- records reg as its attempt (if given) unless a later one is recorded.
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
-- holds makes waiter's place, if any, lapse with its lock of ttl ms.
local function holds(a, waiter, ttl)
  redis.call('ZADD', a, 'XX', string.format('%d', now_ms() + tonumber(ttl)), waiter) -- XX: '' never queues
end
local function dequeue(q, a, w, waiter)
  redis.call('ZREM', q, waiter)
  redis.call('ZREM', a, waiter)
  redis.call('HDEL', w, waiter)
end
-- gone reports whether waiter left less than left_kept ago.
local function gone(a, waiter)
  return tonumber(redis.call('ZSCORE', a, '!' .. waiter) or 0) > now_ms()
end
-- forget marks waiter as left, and drops what has lapsed in a.
local function forget(a, waiter)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', a, '-inf', now)
  redis.call('ZADD', a, string.format('%d', now + left_kept), '!' .. waiter)
  if redis.call('PTTL', a) < left_kept then
    redis.call('PEXPIRE', a, left_kept)
  end
end
-- first dequeues lapsed waiters at the head, first_scan at most, and returns the first live
-- one as {id, ticket}, {} if there is none, or nil if the scan ran out: a live one may be
-- next, and the next call forgets on.
local function first(q, a, w)
  for _ = 1, first_scan do
    local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    if #head == 0 or tonumber(redis.call('ZSCORE', a, head[1]) or 0) > now_ms() then
      return head
    end
    dequeue(q, a, w, head[1])
  end
end
-- ahead reports whether n (1 if nil) live waiters other than waiter (at ticket) head the
-- queue, to go first; every waiter goes before a caller that does not wait (''). A scan
-- that ran out (of lapsed waiters at the head, or of the first_scan it reads) reads as yes.
local function ahead(q, a, w, waiter, ticket, n)
  local head = first(q, a, w)
  if not head then
    return true
  elseif (n or 1) > 1 and #head > 0 then
    head = redis.call('ZRANGE', q, 0, first_scan - 1, 'WITHSCORES')
  end
  local now, live = now_ms(), 0
  for i = 1, #head, 2 do
    local id, score = head[i], tonumber(head[i + 1])
    if id == waiter or waiter ~= '' and (score > ticket or score == ticket and id > waiter) then
      return false
    end
    if i == 1 or tonumber(redis.call('ZSCORE', a, id) or 0) > now then
      live = live + 1
    end
    if live >= (n or 1) then
      return true
    end
  end
  return #head == 2 * first_scan
end
-- remaining returns lock's PTTL, but 1 in its last millisecond (which reads 0), 0 if gone.
local function remaining(lock)
  local pttl = redis.call('PTTL', lock)
  return pttl == 0 and 1 or pttl == -2 and 0 or pttl
end
-- soonest returns the least remaining time of the held permits (as remaining's), -1: none ends.
local function soonest(permits)
  local least = remaining(permits[1])
  for i = 2, #permits do
    local t = remaining(permits[i])
    least = (least <= 0 or t > 0 and t < least) and t or least
  end
  return least
end
-- queue_caller queues the caller of acquire or rlock, if it waits, as one waiter in the queue
-- of each of names, with its attempt; mode: '' a writer's, ' r' a reader's, ' s' a writer
-- set's and ' r' a reader set's, each set's followed by its names (" <length> <lock key>").
local function queue_caller(names, mode)
  local fence = string.sub(mode, 1, 2) == ' r' and '0' or string.match(ARGV[4], '^%d+$') or '1'
  local reg = table.concat({ARGV[1], ARGV[2], fence, tonumber(ARGV[3]) or 0}, ' ') .. mode
  for _, k in ipairs(ARGV[5] ~= '' and names or {}) do
    enqueue(k.queue, k.alive, k.waiters, ARGV[5], ARGV[6], tonumber(ARGV[7]), reg)
  end
end
-- vote returns acquire's or rlock's reply {status, value}, extended as ARGV[8] asks, and a
-- semaphore's with the permits free (a bit each, 48 to a number) and the permit index last.
local function vote(status, value, unguarded, index, free)
  local r = {status, value}
  local id = ARGV[8] == '1' and server_info('run_id:(%x+)')
  if unguarded or index or ARGV[8] == '1' then
    r[3] = unguarded and 1 or ARGV[8] == '1' and not id and info_refused() and 2 or 0
  end
  if id and #id == 40 then
    for i = 1, 40, 10 do
      r[#r + 1] = tonumber(string.sub(id, i, i + 9), 16)
    end
  end
  local base = #r
  for i = 1, index and math.ceil(tonumber(ARGV[9]) / 48) or 0 do
    r[base + i] = 0
  end
  for _, i in ipairs(index and free or {}) do
    local w = base + math.floor((i - 1) / 48) + 1
    r[w] = r[w] + 2 ^ ((i - 1) % 48)
  end
  r[#r + 1] = index
  return r
end
-- read_grant gives token a share of ttl ms (a decimal string); held: the lock key holds
-- readers_hold (else it is free).
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
-- shares returns r's entries that token may own, as {member, score, ...}.
local function shares(r, token)
  local _, n = attempt(token)
  if n and n > 1 then -- an earlier attempt of ours may hold an entry too
    return redis.call('ZRANGE', r, 0, -1, 'WITHSCORES')
  end
  local score = redis.call('ZSCORE', r, token)
  return score and {token, score} or {}
end
-- own_share returns the live entry in r that token owns (as ours says), or nil.
local function own_share(r, token)
  local now = now_ms()
  local entries = shares(r, token)
  for i = 1, #entries, 2 do
    if ours(entries[i], token) and tonumber(entries[i + 1]) > now then
      return entries[i]
    end
  end
end
-- read_release deletes token's entries (as ours says) and frees the lock key if no live
-- entry is left. It returns whether a live one was token's (1 or 0), whether the lock is
-- still held, and whether no writer holds it.
local function read_release(lock, r, token)
  local released = 0
  local now = now_ms()
  local entries = shares(r, token)
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
    return released, holder ~= false, not holder
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
-- keys_at returns the keys of the name whose six KEYS start at j, as a table; its channel is
-- ARGV[2] (release's) for the first, else its lock key's (core.NewKeys's layout).
local function keys_at(j)
  return {lock = KEYS[j], fence = KEYS[j + 1], queue = KEYS[j + 2], alive = KEYS[j + 3], waiters = KEYS[j + 4],
    readers = KEYS[j + 5], channel = j == 1 and ARGV[2] or KEYS[j] .. ':released'}
end
-- set_of parses a set waiter's names, " <length> <lock key>" each, into their keys, each as
-- core.NewKeys lays them out from the lock key.
local function set_of(list)
  local names, pos = {}, 1
  while pos <= #list do
    local n, at = string.match(list, '^ (%d+) ()', pos)
    local k = {lock = string.sub(list, at, at + n - 1)}
    for _, s in ipairs({'fence', 'queue', 'alive', 'waiters', 'readers', 'released'}) do
      k[s] = k.lock .. ':' .. s
    end
    names[#names + 1], pos, k.channel = k, at + n, k.released
  end
  return names
end
-- advance_all advances every name's fence counter (see advance), then raises each to the
-- largest, the set's token, which it returns.
local function advance_all(names, floor)
  local top = 0
  for _, k in ipairs(names) do
    top = math.max(top, advance(k.fence, floor))
  end
  for _, k in ipairs(#names > 1 and names or {}) do
    if tonumber(redis.call('GET', k.fence)) < top then
      redis.call('SET', k.fence, string.format('%d', top), 'PX', fence_idle)
    end
  end
  return top
end
-- take_set sets every name's lock to token for ttl ms, waiter's places lapsing with it, and
-- returns the set's fence (0: none asked, fenced '0').
local function take_set(names, waiter, token, ttl, fenced)
  for _, k in ipairs(names) do
    redis.call('SET', k.lock, token, 'PX', ttl)
    holds(k.alive, waiter, ttl)
  end
  return fenced ~= '0' and advance_all(names, fenced) or 0
end
local hand_over
-- hand_set hands the waiter w (parsed from its attempt's record, as hand_over does), first
-- in a freed name's queue, every name of its set (a lock: the one) if each is free to it (to
-- a writer: free or its own; to a reader: free or read) and it is first in each queue; else
-- the free names stay free, kept for it (it stays first). A reader leaves the queues, and the
-- readers behind it in its other names' queues (but from's) are handed on too. Its message
-- goes on the first name's channel. It returns how many heard, and whether it was handed.
local function hand_set(names, waiter, w, publish, from)
  for _, k in ipairs(names) do
    local holder = redis.call('GET', k.lock)
    local free = not holder or (w.read and holder == readers_hold or not w.read and ours(holder, w.token))
    if not free or (first(k.queue, k.alive, k.waiters) or {})[1] ~= waiter then
      return 0, false
    end
  end
  local channel = names[1].channel .. ':' .. waiter
  local abstain, unguarded = guarded(tonumber(w.guard) or 0)
  if not w.token or abstain then
    return redis.call(publish, channel, ''), false
  end
  local fence = not w.read and take_set(names, waiter, w.token, w.ttl, w.fenced) or 0
  for _, k in ipairs(w.read and names or {}) do
    read_grant(k.lock, k.readers, w.token, w.ttl, redis.call('GET', k.lock) == readers_hold)
    dequeue(k.queue, k.alive, k.waiters, waiter)
  end
  local woken = redis.call(publish, channel, w.token .. ' ' .. string.format('%d', fence) .. (unguarded and ' u' or ''))
  for _, k in ipairs(w.read and #names > 1 and names or {}) do
    woken = woken + (k.lock ~= from and hand_over(k, '', false) or 0)
  end
  return woken, true
end
-- hand_over gives the lock k, free or read, to the first live waiter (unless that is waiter
-- and it stays): with the rest of its set if it waits for several names (hand_set), and,
-- while the lock is read, to each reader next in turn, telling each. It returns how many
-- heard.
function hand_over(k, waiter, stays)
  local publish = ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
  local woken, read = 0, redis.call('GET', k.lock) == readers_hold
  for _ = 1, first_scan do
    local head = first(k.queue, k.alive, k.waiters) or {} -- ran out: hand nothing
    if #head == 0 or (head[1] == waiter and stays) then
      return woken
    end
    local reg = redis.call('HGET', k.waiters, head[1])
    local token, ttl, fenced, guard, mode = string.match(reg or '', '^(%S+) (%d+) (%d+) (%d+)(.*)$')
    local w = {token = token, ttl = ttl, fenced = fenced, guard = guard, read = string.sub(mode or '', 1, 2) == ' r'}
    if read and not w.read then
      return woken -- a writer waits for the readers
    elseif not sem_lock then
      local set = mode and #mode > 2 and set_of(string.sub(mode, 3))
      local n, handed = hand_set(set or {k}, head[1], w, publish, k.lock)
      if not (handed and w.read) then
        return woken + n
      end
      woken, read = woken + n, true
    else -- a semaphore's waiter: a permit's holder does not queue
      local message = ''
      local abstain, unguarded = guarded(tonumber(guard) or 0)
      if token and not abstain then
        redis.call('SET', sem_lock, token, 'PX', ttl)
        local fence = fenced ~= '0' and advance(k.fence, fenced) or 0
        message = token .. ' ' .. string.format('%d', fence) .. ' #' .. sem_index .. (unguarded and ' u' or '')
        dequeue(k.queue, k.alive, k.waiters, head[1])
      end
      return woken + redis.call(publish, k.channel .. ':' .. head[1], message)
    end
  end
  return woken
end
-- settle ends release and runlock for the lock k, and returns the reply: released (0 or 1)
-- whether the caller let go of a holding, holder whether the lock is still held, queued
-- whether the queue exists, absent whether nothing of the caller's is here and no other
-- owner holds the lock. A token that let go where the queue exists is marked left, as a
-- waiter is, a leave's apart from a stay's, so that this release, run again, finds the lock
-- gone (absent) though a hand-over gave it to another, and no release of the other mode
-- reads it so.
local function settle(k, released, holder, queued, absent)
  local waiter = ARGV[4]
  local leave = ARGV[5] == 'leave'
  local mark = ARGV[1] .. (leave and '' or ' stay')
  if released == 0 and not absent and ARGV[1] ~= '' then
    absent = gone(k.alive, mark)
  elseif released == 1 and queued then
    forget(k.alive, mark)
  end
  if waiter ~= '' and leave then
    if queued then
      dequeue(k.queue, k.alive, k.waiters, waiter)
    end
    local _, n = attempt(ARGV[1])
    if queued or (n and n > 1) then -- else no earlier attempt's call can land after the leave
      forget(k.alive, waiter)
    end
  elseif waiter ~= '' and released == 1 and not gone(k.alive, waiter) then
    enqueue(k.queue, k.alive, k.waiters, waiter, ARGV[6], tonumber(ARGV[7]), nil)
    queued = true
  end
  local woken = 0
  if not holder and queued then
    woken = hand_over(k, waiter, not leave)
  end
  if released == 0 and absent then
    return {0, woken, 1}
  end
  return {released, woken}
end
-- settle_each lets go of each name of the caller's lock (KEYS, six a name) with let_go, which
-- returns settle's released, holder, queued and absent for the name, and settles it. It
-- returns release's reply for them all.
local function settle_each(let_go)
  local released, woken, absent = 0, 0, true
  for j = 1, #KEYS, 6 do
    local k = keys_at(j)
    local r = settle(k, let_go(k))
    released, woken, absent = math.max(released, r[1]), woken + r[2], absent and r[3] == 1
  end
  return {released, woken, released == 0 and absent and 1 or nil}
end
