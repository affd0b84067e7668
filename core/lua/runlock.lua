-- runlock (after the prelude queue.lua): a reader's release. It deletes our readers' entry
-- (or an earlier attempt's of our waiter), frees the lock key once no reader is left, and
-- then ends as release does: our waiter leaves the queue or keeps its place, and a free
-- lock is handed to the first waiter. KEYS, ARGV and reply as release's (see
-- release_uncontended.lua); released is 1 if we held a live share here.
local released, holder, unwritten = read_release(KEYS[1], KEYS[6], ARGV[1])
return settle(released, holder, redis.call('EXISTS', KEYS[2]) == 1, unwritten)
