-- release, after release_uncontended.lua (which says what the script does, and its KEYS,
-- ARGV and reply) and the prelude queue.lua: the contended case.
local released = 0
if holder and ours(holder, ARGV[1]) then
  redis.call('DEL', KEYS[1])
  released, holder = 1, false
end
if waiter ~= '' and ARGV[5] == 'leave' then
  if queued then
    dequeue(KEYS[2], KEYS[3], KEYS[4], waiter)
  end
elseif waiter ~= '' and released == 1 then
  enqueue(KEYS[2], KEYS[3], KEYS[4], waiter, ARGV[6], tonumber(ARGV[7]), nil)
  queued = true
end
if holder or not queued then
  return {released, 0}
end
local head = first(KEYS[2], KEYS[3], KEYS[4])
if #head == 0 or (head[1] == waiter and ARGV[5] ~= 'leave') then
  return {released, 0}
end
local message = ''
local reg = redis.call('HGET', KEYS[4], head[1])
local token, ttl, fenced, guard
if reg then
  token, ttl, fenced, guard = string.match(reg, '^(%S+) (%d+) (%d+) (%d+)$')
end
if token then
  local abstain, unguarded = guarded(tonumber(guard))
  if not abstain then
    redis.call('SET', KEYS[1], token, 'PX', ttl)
    holds(KEYS[3], head[1], ttl)
    local fence = 0
    if fenced ~= '0' then
      fence = advance(KEYS[5], fenced) -- to at least the waiter's floor, as its attempt would
    end
    message = token .. ' ' .. string.format('%d', fence)
    if unguarded then
      message = message .. ' u'
    end
  end
end
local publish = 'PUBLISH'
if ARGV[3] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
return {released, redis.call(publish, ARGV[2] .. ':' .. head[1], message)}
