-- acquire: the one script that takes a lock: a writer's lock over one name or several (all or
-- none), a reader's share of it, or one of a semaphore's K permits. The take rule: it takes
-- only what is free or already the caller's. Before it stands the gate, the queue's say: a
-- live waiter that goes first refuses the caller, who then keeps a place in the queue. The
-- gate never writes a lock key; only this script, extend and release do.
--
-- KEYS: a lock's six: lock, fence counter, queue, alive, waiters, readers; a set's: each
-- name's six, name after name; a semaphore's: the six of its queue (permit 0 first, its
-- record of K sixth), then its K permits. ARGV[1] token, ARGV[2] TTL ms, ARGV[3] restart
-- guard s ("0": off), ARGV[4] fence floor ("0": no fence, "1": any), ARGV[5] waiter id ("":
-- does not wait), ARGV[6] ticket, ARGV[7] how long a place is kept (ms), ARGV[8] "1": say
-- which server this is, ARGV[9] the mode: "w" a writer's lock, "r" a reader's share, or a
-- semaphore's K, ARGV[10] a semaphore's hinted permit (from 0; -1: none).
--
-- Replies {status, value[, unguarded, run_id as four numbers of 10 hex digits][, free,
-- permit]}: {1, fence} taken (every name of a set; a reader: a share; fence 0 without one);
-- {0, pttl} held by another (-1: no expiry); {0, 0} free, but a waiter goes first; {0, 1}
-- free, but more lapsed waiters lead the queue than one call drops: call again; {-1, wait}
-- the restart guard abstains for wait ms; {-2, n} the semaphore's record says n
-- permits; the error NOUPTIME <why> if the guard was asked for and the server refuses its
-- uptime. unguarded (1: the guard was asked for, and the server is known to report no
-- uptime; 2: ARGV[8] is "1" and the server refuses the INFO that says which it is) is there
-- if not 0, if ARGV[8] is "1" (then with the run_id), and in a semaphore's {1, ...} and {0,
-- ...}, which end with the permits free to the caller (ceil(K / 48) numbers, permit i bit i %
-- 48 of number i / 48) and the permit taken (-1: none).
local token, ttl, floor, waiter, ticket = ARGV[1], ARGV[2], ARGV[4], ARGV[5], ARGV[6]
local k, read = tonumber(ARGV[9]), ARGV[9] == 'r'
if not (read or ARGV[9] == 'w' or k and k >= 1 and k == math.floor(k)) then
  return redis.error_reply('ERR acquire: mode ' .. tostring(ARGV[9]) .. ': want w, r or a number of permits')
end
local readers_hold = '(readers)' -- the lock key's value while readers hold it
local fence_idle = 3600000 -- core.FenceIdle in ms
local floor_cap = 2000000 -- how far a fence floor counts past the server's clock, in us
local first_scan = 64 -- the most waiters the gate reads, and lapsed ones it drops, per call

local clock, info -- the server's TIME and INFO server, each read once when first needed
local function now_ms()
  clock = clock or redis.call('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
-- advance sets the fence counter f to max(counter + 1, server time in us, floor), and
-- returns it.
local function advance(f)
  now_ms()
  local now = clock[1] .. string.format('%06d', tonumber(clock[2])) -- a decimal string: exact
  local proposed = tonumber(floor)
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

local saved -- the server's LASTSAVE (redis.pcall's reply), read once if the guard needs it
local silent = {} -- by a name's queue key: whether none of its queue keys exists (see quiet)

-- The common case first: a lock over one name, free, where no one queues, with no server to
-- identify, and the restart guard off or proven by LASTSAVE: a writer's, fenced or not, or a
-- reader's share (what the rest of the script does then, without defining the rest; see the
-- guard below, and the take rule at the end).
if (ARGV[9] == 'w' or read) and #KEYS == 6 and ARGV[8] ~= '1' then
  local guard = tonumber(ARGV[3]) or 0
  if guard > 0 then
    saved = redis.pcall('LASTSAVE')
    now_ms()
  end
  local proven = guard == 0 or type(saved) == 'number' and saved > 0 and tonumber(clock[1]) - saved > guard + 1
  if proven then
    silent[KEYS[3]] = redis.call('EXISTS', KEYS[3], KEYS[4], KEYS[5]) == 0
  end
  if proven and silent[KEYS[3]] and not redis.call('GET', KEYS[1]) then
    if not read then
      redis.call('SET', KEYS[1], token, 'PX', ttl)
      return {1, floor ~= '0' and advance(KEYS[2]) or 0}
    end
    local ms = tonumber(ttl)
    redis.call('ZADD', KEYS[6], string.format('%d', now_ms() + ms), token)
    redis.call('SET', KEYS[1], readers_hold, 'PX', ms)
    if redis.call('PTTL', KEYS[6]) < ms then
      redis.call('PEXPIRE', KEYS[6], ms)
    end
    return {1, 0}
  end
end
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
-- vote returns the reply {status, value}, extended as ARGV[8] asks, and a semaphore's with
-- the permits free (a bit each, 48 to a number) and the permit index last.
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
  for i = 1, index and math.ceil(k / 48) or 0 do
    r[base + i] = 0
  end
  for _, i in ipairs(index and free or {}) do
    local w = base + math.floor((i - 1) / 48) + 1
    r[w] = r[w] + 2 ^ ((i - 1) % 48)
  end
  r[#r + 1] = index
  return r
end

-- The restart guard: a server up for no longer than the guard grants nothing, and one that
-- refuses to say its uptime grants nothing either (see info_refused). LASTSAVE, the time of
-- the last save, is never before the server started (it counts as saved at its start): a
-- last save more than the guard ago, and a second for the two clocks' rounding, proves the
-- uptime without INFO, whose reply costs far more. A save since, or a server that refuses
-- LASTSAVE, leaves it to INFO. (A proven uptime reads as guard + 1: one that passes.)
local guard = tonumber(ARGV[3]) or 0
local function saved_long_ago()
  saved = saved or redis.pcall('LASTSAVE')
  if type(saved) ~= 'number' or saved <= 0 then
    return false
  end
  clock = clock or redis.call('TIME')
  return tonumber(clock[1]) - saved > guard + 1
end
local uptime = guard > 0 and (saved_long_ago() and guard + 1 or tonumber(server_info('uptime_in_seconds:(%d+)') or ''))
local refused = guard > 0 and not uptime and info_refused()
if refused then
  return redis.error_reply('NOUPTIME ' .. refused)
end
local unguarded = guard > 0 and not uptime
if uptime and uptime <= guard then -- only uptime > guard proves it
  return vote(-1, (guard - uptime + 1) * 1000)
end
if k then -- every holder of a semaphore counts the same K while its record stands
  local recorded = redis.call('GET', KEYS[6])
  if recorded and recorded ~= ARGV[9] then
    return {-2, tonumber(recorded) or -1}
  end
end

-- The gate. A waiter queues per name: its id in the queue by ticket, in alive by when its
-- place lapses, in waiters as "<w or r> <channel>". A waiter that left less than 10 s ago
-- is marked "!<id>" in alive: a call of its sent before it left may land after, and must
-- neither queue it nor take the lock in its name.
local function live(alive, id, now)
  return tonumber(redis.call('ZSCORE', alive, id) or 0) > now
end
-- quiet reports whether none of n's queue keys exists: no waiter is queued and no leave is
-- marked, so the gate has nothing to refuse and there is no place to drop. It asks once per
-- name; only place creates those keys, and the script ends after it.
local function quiet(n)
  if silent[n.queue] == nil then
    silent[n.queue] = redis.call('EXISTS', n.queue, n.alive, n.waiters) == 0
  end
  return silent[n.queue]
end
local first = {queue = KEYS[3], alive = KEYS[4], waiters = KEYS[5]} -- the first name's (a semaphore's)
if waiter ~= '' and not quiet(first) and live(first.alive, '!' .. waiter, now_ms()) then
  return vote(0, 0, nil, k and -1)
end
-- ahead reports whether the caller waits behind the queue of n (its keys): 'first' if live
-- waiters go before it (one for a writer, one that is a writer for a reader, free of them
-- for a semaphore with free permits; every waiter goes before a caller that does not wait),
-- 'lapsed' if more lapsed waiters lead the queue than it drops in one call (a live one may
-- come next), else false. It drops lapsed waiters at the head first; a queue longer than it
-- reads counts as one that goes first. A caller refused for 'lapsed' is told to call again
-- at once (a holder's 1 ms): while the lock is free no release wakes it, and its next call
-- drops on.
local function ahead(n, free)
  local now = now_ms()
  for i = 1, first_scan + 1 do
    local head = redis.call('ZRANGE', n.queue, 0, 0)[1]
    if not head or live(n.alive, head, now) then
      break
    elseif i > first_scan then
      return 'lapsed'
    end
    redis.call('ZREM', n.queue, head)
    redis.call('ZREM', n.alive, head)
    redis.call('HDEL', n.waiters, head)
  end
  local entries, before = redis.call('ZRANGE', n.queue, 0, first_scan - 1, 'WITHSCORES'), 0
  for i = 1, #entries, 2 do
    local id, t = entries[i], entries[i + 1]
    if id == waiter or waiter ~= '' and (tonumber(t) > tonumber(ticket) or t == ticket and id > waiter) then
      return false
    end
    local writer = not read or string.sub(redis.call('HGET', n.waiters, id) or 'w', 1, 1) == 'w'
    if writer and live(n.alive, id, now) then
      before = before + 1
      if before >= (free or 1) then
        return 'first'
      end
    end
  end
  return #entries == 2 * first_scan and 'first'
end
-- place keeps the caller's place in the queue of each of names, for ARGV[7] ms.
local function place(names)
  if waiter == '' then
    return
  end
  local keep = tonumber(ARGV[7])
  local channel = string.sub(KEYS[3], 1, -7) .. ':released:' .. waiter -- core's Keys.Wake
  for _, n in ipairs(names) do
    redis.call('ZADD', n.queue, ticket, waiter)
    redis.call('ZADD', n.alive, string.format('%d', now_ms() + keep), waiter)
    redis.call('HSET', n.waiters, waiter, (read and 'r ' or 'w ') .. channel)
    for _, key in ipairs({n.queue, n.alive, n.waiters}) do
      if redis.call('PTTL', key) < keep then
        redis.call('PEXPIRE', key, 2 * keep)
      end
    end
  end
end
-- unplace takes the caller out of the queue of each of names: it holds now.
local function unplace(names)
  for _, n in ipairs(waiter ~= '' and names or {}) do
    if not quiet(n) then
      redis.call('ZREM', n.queue, waiter)
      redis.call('ZREM', n.alive, waiter)
      redis.call('HDEL', n.waiters, waiter)
    end
  end
end

-- The take rule. ours reports whether holder is token or an earlier attempt of its
-- waiter's ("<waiter id>.<attempt>"): a resend, or a retry after a lost reply.
local function ours(holder)
  local id, n = string.match(token, '^(.+)%.(%d+)$')
  local hid, hn = string.match(holder, '^(.+)%.(%d+)$')
  return holder == token or (id ~= nil and id == hid and tonumber(hn) <= tonumber(n))
end
-- remaining returns key's PTTL, but 1 in its last millisecond (which reads 0), 0 if gone.
local function remaining(key)
  local pttl = redis.call('PTTL', key)
  return pttl == 0 and 1 or pttl == -2 and 0 or pttl
end
-- share returns the caller's live entry among the readers of r (an earlier attempt's too).
local function share(r)
  local now, n = now_ms(), string.match(token, '%.(%d+)$')
  local entries = {token, redis.call('ZSCORE', r, token) or 0}
  if n and tonumber(n) > 1 then -- an earlier attempt of ours may hold an entry too
    entries = redis.call('ZRANGE', r, 0, -1, 'WITHSCORES')
  end
  for i = 1, #entries, 2 do
    if ours(entries[i]) and tonumber(entries[i + 1]) > now then
      return entries[i]
    end
  end
end

if k then -- a semaphore: its own permit (a resend), or the hinted one if free, else the first free
  local n = first
  local permits, free, pick, least = {unpack(KEYS, 7)}, {}, nil, -1
  for i = 1, #permits do
    local h = redis.call('GET', permits[i])
    local own = h and ours(h)
    pick = pick or own and i or nil
    free[#free + 1] = (own or not h) and i or nil
    local r = h and remaining(permits[i]) or 0
    least = (least <= 0 or r > 0 and r < least) and r or least
  end
  local hold = math.max(tonumber(ttl), waiter ~= '' and 2 * tonumber(ARGV[7]) or 0)
  if redis.call('PTTL', KEYS[6]) < hold then -- the record stands while a permit may be held
    redis.call('SET', KEYS[6], ARGV[9], 'PX', hold)
  end
  local gate = not pick and #free > 0 and not quiet(n) and redis.call('EXISTS', n.queue) == 1 and ahead(n, #free)
  if not pick and (#free == 0 or gate) then
    place({n})
    return vote(0, #free == 0 and least or gate == 'lapsed' and 1 or 0, nil, -1)
  end
  local hint = tonumber(ARGV[10]) or -1
  pick = pick or (hint >= 0 and hint < #permits and not redis.call('GET', permits[hint + 1])) and hint + 1 or free[1]
  redis.call('SET', permits[pick], token, 'PX', ttl)
  unplace({n})
  return vote(1, floor ~= '0' and advance(KEYS[2]) or 0, unguarded, pick - 1, free)
end

local names, wait, blocked = {}, 0, false
for j = 1, #KEYS, 6 do
  local n = {lock = KEYS[j], fence = KEYS[j + 1], queue = KEYS[j + 2], alive = KEYS[j + 3], waiters = KEYS[j + 4],
    readers = KEYS[j + 5]}
  names[#names + 1] = n
  n.holder = redis.call('GET', n.lock)
  n.share = read and n.holder == readers_hold and share(n.readers)
  local own = n.share or not read and n.holder and ours(n.holder) -- ours, whatever the queue says
  local free = not n.holder or read and n.holder == readers_hold
  local gate = not own and free and not quiet(n) and redis.call('EXISTS', n.queue) == 1 and ahead(n)
  if not own and (not free or gate) then
    -- held by another (its PTTL), a waiter goes first (0 if free), or call again (1)
    local r = gate == 'lapsed' and 1 or remaining(n.lock)
    blocked, wait = true, (wait < 0 or r < 0) and -1 or math.max(wait, r)
  end
end
if blocked then
  place(names)
  return vote(0, wait)
end
unplace(names)
if read then -- a share of each name: an entry in its readers, under the marker's TTL
  local ms = tonumber(ttl)
  for _, n in ipairs(names) do
    if n.share then
      redis.call('ZREM', n.readers, n.share)
    end
    redis.call('ZADD', n.readers, string.format('%d', now_ms() + ms), token)
    if n.holder ~= readers_hold then
      redis.call('SET', n.lock, readers_hold, 'PX', ms)
    end
    for _, key in ipairs({n.lock, n.readers}) do
      if redis.call('PTTL', key) < ms then
        redis.call('PEXPIRE', key, ms)
      end
    end
  end
  return vote(1, 0, unguarded)
end
local top = 0
for _, n in ipairs(names) do
  redis.call('SET', n.lock, token, 'PX', ttl)
  top = floor ~= '0' and math.max(top, advance(n.fence)) or 0
end
for _, n in ipairs(#names > 1 and top > 0 and names or {}) do -- a set's token: the largest
  if tonumber(redis.call('GET', n.fence)) < top then
    redis.call('SET', n.fence, string.format('%d', top), 'PX', fence_idle)
  end
end
return vote(1, top, unguarded)
