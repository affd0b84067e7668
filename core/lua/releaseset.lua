-- releaseset: KEYS as acquireset's; ARGV and replies as a lock's release (ARGV[2] unused:
-- each name's channel is its lock key .. ':released').
local released, woken, absent = 0, 0, true
for j = 1, #KEYS, 6 do
  local k = keys_of(KEYS[j])
  local holder = redis.call('GET', k.lock)
  local mine = holder and ours(holder, ARGV[1])
  if mine then
    redis.call('DEL', k.lock)
  end
  local r = settle(k, mine and 1 or 0, holder and not mine, redis.call('EXISTS', k.queue) == 1, not holder)
  released, woken, absent = math.max(released, r[1]), woken + r[2], absent and r[3] == 1
end
if released == 0 and absent then
  return {0, woken, 1}
end
return {released, woken}
