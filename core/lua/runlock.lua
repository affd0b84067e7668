-- runlock: KEYS, ARGV and replies as release's; released is 1 if a live share was ours.
local released, holder, unwritten = read_release(KEYS[1], KEYS[6], ARGV[1])
return settle(keys_at(1), released, holder, redis.call('EXISTS', KEYS[3]) == 1, unwritten)
