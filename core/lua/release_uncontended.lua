-- release, in three parts: this uncontended case, the prelude queue.lua, and release.lua.
-- It deletes the lock if it is ours; then, if the lock is free, hands it to the first live
-- waiter in the queue (or to the readers first in it) and tells that waiter on its own
-- channel, so that waiters take turns and the next one need not call again to get it. The
-- readers' release (runlock.lua) takes the same KEYS and ARGV, and ends the same way.
-- KEYS[1] lock key, KEYS[2] waiter queue, KEYS[3] waiter liveness, KEYS[4] the waiters'
-- latest attempts, KEYS[5] fence counter key (see acquire), KEYS[6] readers (see queue.lua)
-- ARGV[1] our random token ("" to release nothing); with a waiter's token, the lock held
--         by an earlier attempt of the same waiter is released too,
-- ARGV[2] release channel: the first waiter's channel is ARGV[2] .. ':' .. its waiter id,
-- ARGV[3] "SPUBLISH" to publish with sharded pub/sub (Redis Cluster), anything else: PUBLISH,
-- ARGV[4] our waiter id ("" if none),
-- ARGV[5] "leave" to take our waiter id out of the queue; anything else keeps our place (a
--         failed attempt lets go of its keys but goes on waiting), and we are not woken,
-- ARGV[6], ARGV[7] when keeping our place: our ticket, and how long in milliseconds the
--         place is kept (see acquire). A node that granted our failed attempt may not have
--         queued us yet: this queues us, so that we are first here too.
-- The message to the first waiter is "<token> <fence>" if the lock is now its latest
-- attempt's (token; fence as acquire's reply to that attempt would carry it, advanced to
-- at least the attempt's floor; 0 if it did not ask for one, or is a reader),
-- followed by " u" if it asked for the restart guard and the server cannot report its
-- uptime. It is empty if the lock could not be handed over (the waiter recorded no attempt
-- here, or the restart guard abstains): then the waiter should call again.
-- Reply {released, woken} or {0, woken, 1}: released is 1 if the lock was ours and is
-- deleted, else 0; woken is how many subscribers heard the messages (0 if no one was told).
-- The third element, 1, says that nothing of ours is here and no other owner took the lock
-- either: the lock key is gone, or this release already ran (a backend's resend of it) and
-- handed the lock over (see settle in queue.lua). Within the lease's validity this is a
-- release, not a loss.
local holder = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[2]) == 1
local waiter = ARGV[4]
-- Without a queue, and if we do not join one, there is no one to hand over to: the common,
-- uncontended case ends here, before the prelude's definitions. Not for the leave of a
-- waiter past its first attempt: an earlier attempt's call may still land here, and the
-- leave must be remembered (see settle in queue.lua).
local attempt_n = string.match(ARGV[1], '%.(%d+)$')
local retried = waiter ~= '' and attempt_n ~= nil and tonumber(attempt_n) > 1
if not queued and (waiter == '' or ARGV[5] == 'leave' and not retried) then
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return {1, 0}
  elseif not holder then
    return {0, 0, 1}
  end
end
