-- release: the one script that lets go of a lock. It deletes only what is the caller's:
-- its lock (each name of a set), its reader's share, or its semaphore's permit. Then, where
-- the lock is free, it wakes the first live waiter (and the readers right behind a reader;
-- a semaphore's first waiters, one per permit free): each woken waiter takes the lock
-- itself, with acquire. The caller's place in the queue is left ("leave") or kept ("stay").
--
-- KEYS as acquire's (a semaphore's KEYS[1] is the permit the caller holds here, if ARGV[8] is
-- "1"). ARGV[1] token ("": none), ARGV[2] the mode, as acquire's ARGV[9], ARGV[3] "SPUBLISH"
-- for sharded pub/sub (else PUBLISH), ARGV[4] waiter id ("": none), ARGV[5] "leave" to
-- leave the queue, else keep the place: ARGV[6] ticket, ARGV[7] for how long (ms), ARGV[8]
-- a semaphore's "1" if KEYS[1] is its permit held. Replies {released, woken}: released 1 if
-- a holding of the caller's was here, woken how many heard a wake-up; {0, woken, 1}:
-- nothing of the caller's is here and no other owner holds the lock, or this release let
-- go here before (a leave, or a stay apart, is marked in alive as "!<token>").
local token, waiter, leave = ARGV[1], ARGV[4], ARGV[5] == 'leave'
local k, read = tonumber(ARGV[2]), ARGV[2] == 'r'
if not (read or ARGV[2] == 'w' or k and k >= 1 and k == math.floor(k)) then
  return redis.error_reply('ERR release: mode ' .. tostring(ARGV[2]) .. ': want w, r or a number of permits')
end
local readers_hold = '(readers)' -- the lock key's value while readers hold it
local left_kept = 10000 -- how long a leave is remembered in alive, as '!' .. id, in ms
local first_scan = 64 -- the most waiters a wake-up reads

local clock -- the server's TIME, read once when first needed
local function now_ms()
  clock = clock or redis.call('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

-- The common case first: a first attempt's lock over one name, let go where no one queues:
-- a writer's, or a reader's last live share (what the rest of the script does then, without
-- defining the rest).
if (ARGV[2] == 'w' or read) and #KEYS == 6 and (waiter == '' or leave and token == waiter .. '.1')
    and redis.call('EXISTS', KEYS[3]) == 0 then
  local holder = redis.call('GET', KEYS[1])
  if not read and holder == token then
    redis.call('DEL', KEYS[1])
    return {1, 0}
  end
  local shares = read and holder == readers_hold and redis.call('ZRANGE', KEYS[6], 0, 1, 'WITHSCORES')
  if shares and #shares == 2 and shares[1] == token and tonumber(shares[2]) > now_ms() then
    redis.call('DEL', KEYS[1], KEYS[6])
    return {1, 0}
  end
end
local function live(alive, id, now)
  return tonumber(redis.call('ZSCORE', alive, id) or 0) > now
end
-- ours reports whether holder is token or an earlier attempt of its waiter's.
local function ours(holder)
  local id, n = string.match(token, '^(.+)%.(%d+)$')
  local hid, hn = string.match(holder, '^(.+)%.(%d+)$')
  return holder == token or (id ~= nil and id == hid and tonumber(hn) <= tonumber(n))
end

-- The queue's part: marks, places and wake-ups; it writes no lock key.
-- forget marks id as left in alive, for left_kept, and drops what has lapsed there.
local function forget(alive, id)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
  redis.call('ZADD', alive, string.format('%d', now + left_kept), '!' .. id)
  if redis.call('PTTL', alive) < left_kept then
    redis.call('PEXPIRE', alive, left_kept)
  end
end
-- keep puts the caller back in the queue of n at its ticket, for ARGV[7] ms.
local function keep(n)
  local ms = tonumber(ARGV[7])
  local channel = string.sub(KEYS[3], 1, -7) .. ':released:' .. waiter -- core's Keys.Wake
  redis.call('ZADD', n.queue, ARGV[6], waiter)
  redis.call('ZADD', n.alive, string.format('%d', now_ms() + ms), waiter)
  redis.call('HSET', n.waiters, waiter, (read and 'r ' or 'w ') .. channel)
  for _, key in ipairs({n.queue, n.alive, n.waiters}) do
    if redis.call('PTTL', key) < ms then
      redis.call('PEXPIRE', key, 2 * ms)
    end
  end
end
-- wake tells the first live waiter of n that it may take the lock, and the readers right
-- behind it if it is a reader (only readers, if readers hold the lock); with free, a
-- semaphore's first free waiters. A caller that stays first calls again itself. It returns
-- how many heard.
local function wake(n, free, readers)
  local publish = ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
  local now, woken, told = now_ms(), 0, 0
  for _, id in ipairs(redis.call('ZRANGE', n.queue, 0, first_scan - 1)) do
    if live(n.alive, id, now) then
      local mode, channel = string.match(redis.call('HGET', n.waiters, id) or '', '^(%a) (.+)$')
      if (id == waiter and not leave) or not free and mode ~= 'r' and (readers or told > 0) then
        break
      end
      woken, told = woken + (channel and redis.call(publish, channel, '') or 0), told + 1
      if free and told >= free or not free and mode ~= 'r' then
        break
      end
      readers = not free
    end
  end
  return woken
end
-- settle ends the release on the name (or semaphore) n: released (0 or 1) whether the
-- caller let go of a holding, holder the lock key's value after it, queued whether the
-- queue exists, absent whether nothing of the caller's is here and no other owner holds
-- the lock, free a semaphore's permits free. It returns the reply.
local function settle(n, released, holder, queued, absent, free)
  local mark = token .. (leave and '' or ' stay')
  if released == 0 and not absent and token ~= '' then
    absent = live(n.alive, '!' .. mark, now_ms())
  elseif released == 1 and queued then
    forget(n.alive, mark)
  end
  if waiter ~= '' and leave then
    if queued then
      redis.call('ZREM', n.queue, waiter)
      redis.call('ZREM', n.alive, waiter)
      redis.call('HDEL', n.waiters, waiter)
    end
    local attempt = tonumber(string.match(token, '%.(%d+)$') or '1')
    if queued or attempt > 1 then -- else no earlier attempt's call can land after the leave
      forget(n.alive, waiter)
    end
  elseif waiter ~= '' and released == 1 and not live(n.alive, '!' .. waiter, now_ms()) then
    keep(n)
    queued = true
  end
  local woken = 0
  if queued and (free or 1) > 0 and (not holder or holder == readers_hold) then
    woken = wake(n, free, holder == readers_hold)
  end
  if released == 0 and absent then
    return {0, woken, 1}
  end
  return {released, woken}
end

if k then -- a semaphore: every permit of the caller's goes
  local n = {queue = KEYS[3], alive = KEYS[4], waiters = KEYS[5]}
  local absent = not (ARGV[8] == '1' and redis.call('GET', KEYS[1]))
  local released, free = 0, 0
  for i = 7, #KEYS do
    local h = redis.call('GET', KEYS[i])
    if h and ours(h) then
      redis.call('DEL', KEYS[i])
      released, h = 1, false
    end
    free = free + (h and 0 or 1)
  end
  local reply = settle(n, released, nil, redis.call('EXISTS', n.queue) == 1, absent, free)
  if free == k and redis.call('EXISTS', n.queue) == 0 then -- no permit held, no one waits
    redis.call('DEL', KEYS[6]) -- the record goes
  end
  return reply
end

-- let_go lets go of the caller's holding of the name n, and returns settle's released,
-- holder and absent.
local function let_go(n)
  local h = redis.call('GET', n.lock)
  if not read then
    if h and ours(h) then
      redis.call('DEL', n.lock)
      return 1, false, false
    end
    return 0, h, not h
  end
  local released, now = 0, now_ms()
  local entries = {token, redis.call('ZSCORE', n.readers, token)}
  if tonumber(string.match(token, '%.(%d+)$') or '1') > 1 then -- an earlier attempt's too
    entries = redis.call('ZRANGE', n.readers, 0, -1, 'WITHSCORES')
  end
  for i = 1, #entries, 2 do
    if entries[i + 1] and ours(entries[i]) then
      redis.call('ZREM', n.readers, entries[i])
      released = tonumber(entries[i + 1]) > now and 1 or released
    end
  end
  if h ~= readers_hold then
    return released, h, not h
  end
  local last = redis.call('ZRANGE', n.readers, -1, -1, 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) <= now then -- the last share: the marker goes
    redis.call('DEL', n.lock, n.readers)
    return released, false, true
  end
  redis.call('ZREMRANGEBYSCORE', n.readers, '-inf', now)
  redis.call('PEXPIRE', n.lock, tonumber(last[2]) - now)
  return released, h, true -- other readers exclude no reader
end

local released, woken, absent = 0, 0, true
for j = 1, #KEYS, 6 do
  local n = {lock = KEYS[j], queue = KEYS[j + 2], alive = KEYS[j + 3], waiters = KEYS[j + 4], readers = KEYS[j + 5]}
  local r, holder, gone = let_go(n)
  local reply = settle(n, r, holder, redis.call('EXISTS', n.queue) == 1, gone)
  released, woken, absent = math.max(released, reply[1]), woken + reply[2], absent and reply[3] == 1
end
return {released, woken, released == 0 and absent and 1 or nil}
