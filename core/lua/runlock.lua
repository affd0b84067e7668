-- runlock: KEYS, ARGV and replies as release's (a lock's or a set's); released is 1 if a
-- live share was ours.
return settle_each(function(k)
  local released, holder, unwritten = read_release(k.lock, k.readers, ARGV[1])
  return released, holder, redis.call('EXISTS', k.queue) == 1, unwritten
end)
