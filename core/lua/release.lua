-- release (run after queue.lua): delete the lock if it is ours; then, if the lock is free,
-- wake the first live waiter in the queue (on its own channel), so that waiters take turns.
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
local holder = redis.call('GET', KEYS[1])
local released = 0
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released, holder = 1, false
end
local waiter = ARGV[4]
if waiter ~= '' and ARGV[5] == 'leave' then
  dequeue(KEYS[2], KEYS[3], waiter)
elseif waiter ~= '' and released == 1 then
  enqueue(KEYS[2], KEYS[3], waiter, ARGV[6], tonumber(ARGV[7]))
end
if holder then
  return {released, 0}
end
local head = first(KEYS[2], KEYS[3])
if #head == 0 or (head[1] == waiter and ARGV[5] ~= 'leave') then
  return {released, 0}
end
local publish = 'PUBLISH'
if ARGV[3] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
return {released, redis.call(publish, ARGV[2] .. ':' .. head[1], '')}
