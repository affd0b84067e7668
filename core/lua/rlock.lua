-- rlock (after the prelude queue.lua): take a share of the lock as a reader, if no writer
-- holds it and no live waiter queued before us; otherwise queue us as a waiter. Readers
-- hold together (see queue.lua); a writer waiting in the queue blocks the readers that
-- come after it, so that readers cannot starve it.
-- KEYS as acquire's (KEYS[2], the fence counter, is not touched), and KEYS[6] the readers.
-- ARGV as acquire's; ARGV[4] must be "0" (a reader advances no fence).
-- Replies as acquire's: {1, 0} we hold a share (newly, or again: a share held by this or an
-- earlier attempt of ours is ours whatever the queue says, and its time is renewed),
-- {0, pttl} a writer holds it (we are queued if we gave a waiter id), {0, pttl}
-- or {0, 0} a live waiter queued before us goes first (pttl: the readers' remaining time,
-- if they hold it), {-1, wait} the restart guard abstains. A reader that gets its share
-- leaves the queue; its holding lapses with its entry.
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end

local token, waiter, ticket, keep = ARGV[1], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local function queue()
  if waiter ~= '' then
    local reg = token .. ' ' .. ARGV[2] .. ' 0 ' .. (tonumber(ARGV[3]) or 0) .. ' r'
    enqueue(KEYS[3], KEYS[4], KEYS[5], waiter, ARGV[6], keep, reg)
  end
end
local function remaining()
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl == 0 then
    pttl = 1 -- a key in its last millisecond reads 0: it is held for up to 1 ms more
  end
  return math.max(pttl, 0)
end

-- A call of a reader that has left, landing late (see left_kept in queue.lua): refused.
if waiter ~= '' and gone(KEYS[4], waiter) then
  return vote(0, remaining())
end

local holder = redis.call('GET', KEYS[1])
if holder and holder ~= readers_hold then
  queue()
  return vote(0, remaining())
end
local queued = redis.call('EXISTS', KEYS[3]) == 1
-- A share held by this attempt (this very call, run again: a backend resends a script whose
-- reply a broken connection lost) or handed to an earlier attempt of ours is ours, whatever
-- the queue says, as a writer's lock is in acquire: this attempt takes it over (else a
-- share would stand, behind a writer it waits for, that the client counts as refused and
-- so never releases).
local share = holder and own_share(KEYS[6], token)
if share then
  redis.call('ZREM', KEYS[6], share)
  read_grant(KEYS[1], KEYS[6], token, ARGV[2], true)
  if queued and waiter ~= '' then
    dequeue(KEYS[3], KEYS[4], KEYS[5], waiter)
  end
  return vote(1, 0, unguarded)
end
if queued then
  local head = first(KEYS[3], KEYS[4], KEYS[5])
  if #head > 0 and head[1] ~= waiter then
    local score = tonumber(head[2])
    if waiter == '' or score < ticket or (score == ticket and head[1] < waiter) then
      queue()
      return vote(0, remaining())
    end
  end
end
read_grant(KEYS[1], KEYS[6], token, ARGV[2], holder == readers_hold)
if queued and waiter ~= '' then
  dequeue(KEYS[3], KEYS[4], KEYS[5], waiter)
end
return vote(1, 0, unguarded)
