-- release: delete the lock if it is ours; then, if the lock is free, wake the first live
-- waiter in the queue (on its own channel), so that waiters take turns in order.
-- KEYS[1] lock key, KEYS[2] waiter queue, KEYS[3] waiter liveness (see acquire)
-- ARGV[1] our random token ("" to release nothing), ARGV[2] release channel: the first
-- waiter's channel is ARGV[2] .. ':' .. its waiter id,
-- ARGV[3] "SPUBLISH" to publish with sharded pub/sub (Redis Cluster), anything else: PUBLISH,
-- ARGV[4] our waiter id ("" if none),
-- ARGV[5] "leave" to take our waiter id out of the queue; anything else keeps our place (a
--         failed attempt lets go of its keys but goes on waiting), and we are not woken,
-- ARGV[6], ARGV[7] when keeping our place: our ticket, and how long in milliseconds the
--         place is kept (see acquire). A node that granted our failed attempt may not have
--         queued us yet: this queues us, so that we are first here too.
-- Reply {released, woken}: released is 1 if the lock was ours and is deleted, else 0; woken
-- is how many subscribers heard the wake-up (0 if no one was woken).
if redis.replicate_commands then
  redis.replicate_commands() -- Redis 3.2 to 4 need this before TIME; later versions ignore it
end
local holder = redis.call('GET', KEYS[1])
local released = 0
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released, holder = 1, false
end
local waiter = ARGV[4]
if waiter ~= '' and ARGV[5] == 'leave' then
  redis.call('ZREM', KEYS[2], waiter)
  redis.call('ZREM', KEYS[3], waiter)
elseif waiter ~= '' and released == 1 then
  local t = redis.call('TIME')
  local keep = tonumber(ARGV[7])
  redis.call('ZADD', KEYS[2], ARGV[6], waiter)
  redis.call('ZADD', KEYS[3], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + keep), waiter)
  if redis.call('PTTL', KEYS[2]) < keep then
    redis.call('PEXPIRE', KEYS[2], keep)
    redis.call('PEXPIRE', KEYS[3], keep)
  end
end
if holder then
  return {released, 0}
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if #head > 0 then
  -- Forget the waiters that stopped calling, then see who is first.
  local t = redis.call('TIME')
  local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
  if #gone > 0 then
    for _, id in ipairs(gone) do
      redis.call('ZREM', KEYS[2], id)
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    head = redis.call('ZRANGE', KEYS[2], 0, 0)
  end
end
if #head == 0 or (head[1] == waiter and ARGV[5] ~= 'leave') then
  return {released, 0}
end
local publish = 'PUBLISH'
if ARGV[3] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
return {released, redis.call(publish, ARGV[2] .. ':' .. head[1], '')}
