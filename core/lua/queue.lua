-- queue: the waiter queue, shared by the acquire and release scripts (core puts this text
-- in front of each). A queue is two sorted sets: q holds waiter ids by ticket (the turn
-- order, smaller first, ties by id), a holds the same ids by the server time in
-- milliseconds at which each waiter's place lapses unless it calls again.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis 3.2 to 4 need this before TIME; later versions ignore it
end

local clock -- the server's TIME, read once when first needed
local function server_time()
  clock = clock or redis.call('TIME')
  return clock
end

local function now_ms()
  local t = server_time()
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- enqueue puts waiter in the queue at ticket (a decimal string: Lua would print a 16-digit
-- number in exponent form, inexactly), or keeps its place, for keep more milliseconds. The
-- sets expire when no one calls, but never before a place they keep.
local function enqueue(q, a, waiter, ticket, keep)
  redis.call('ZADD', q, ticket, waiter)
  redis.call('ZADD', a, string.format('%d', now_ms() + keep), waiter)
  if redis.call('PTTL', q) < keep then
    redis.call('PEXPIRE', q, keep)
    redis.call('PEXPIRE', a, keep)
  end
end

local function dequeue(q, a, waiter)
  redis.call('ZREM', q, waiter)
  redis.call('ZREM', a, waiter)
end

-- first forgets the waiters whose place lapsed and returns the first one left as
-- {id, ticket}, or an empty table if none is queued.
local function first(q, a)
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if #head == 0 then
    return head
  end
  local now = string.format('%d', now_ms())
  local gone = redis.call('ZRANGEBYSCORE', a, '-inf', now)
  if #gone == 0 then
    return head
  end
  for _, id in ipairs(gone) do
    redis.call('ZREM', q, id)
  end
  redis.call('ZREMRANGEBYSCORE', a, '-inf', now)
  return redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
end

