-- release, after release_uncontended.lua (which says what the script does, and its KEYS,
-- ARGV and reply) and the prelude queue.lua: the contended case.
local released, absent = 0, not holder
if holder and ours(holder, ARGV[1]) then
  redis.call('DEL', KEYS[1])
  released, holder = 1, false
end
return settle(released, holder, queued, absent)
