-- acquire: take the lock if it is free (or already ours), and advance the fence counter.
-- KEYS[1] lock key, KEYS[2] fence counter key
-- ARGV[1] our random token, ARGV[2] TTL in milliseconds,
-- ARGV[3] restart guard in whole seconds ("0" or absent: off),
-- ARGV[4] "0" to leave the fence counter alone (anything else, or absent: advance it)
-- Replies:
--   {1, fence}     the lock is ours: newly set, or already set with our token (a retry after
--                  a lost reply). fence is the counter, now max(counter + 1, server time in
--                  microseconds), so a node that lost its data does not start again from 1;
--                  0 when ARGV[4] is "0".
--   {1, fence, 1}  the same, but the guard was asked for and the server cannot report its
--                  uptime, so this node is not guarded.
--   {0, pttl}      another owner holds it: the longest this node can keep us waiting.
--   {-1, wait}     the server started less than the guard ago, so it may have forgotten locks
--                  it granted before a restart: it abstains for wait more milliseconds.
if redis.replicate_commands then
  redis.replicate_commands() -- Redis 3.2 to 4 need this before TIME; later versions ignore it
end
local unguarded = false
local guard = tonumber(ARGV[3]) or 0
if guard > 0 then
  local info = redis.pcall('INFO', 'server')
  local uptime = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not uptime then
    unguarded = true
  elseif uptime <= guard then
    -- uptime_in_seconds is a difference of whole wall-clock seconds and can read one more
    -- than has passed: only uptime > guard proves that the guard's time has gone by.
    return {-1, (guard - uptime + 1) * 1000}
  end
end
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local fence = 0
if ARGV[4] ~= '0' then
  local t = redis.call('TIME')
  -- The microseconds as a decimal string: exact, and never printed in exponent form.
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local counter = redis.call('GET', KEYS[2])
  if counter and tonumber(counter) >= tonumber(now) then
    fence = redis.call('INCR', KEYS[2])
  else
    redis.call('SET', KEYS[2], now)
    fence = tonumber(now)
  end
end
if unguarded then
  return {1, fence, 1}
end
return {1, fence}
