-- permits (after the prelude queue.lua): the number of permits of a semaphore, on which all
-- its holders must agree.
-- KEYS[1] the semaphore's permits key
-- ARGV[1] our number of permits (a decimal), ARGV[2] how long the record is kept (ms),
-- ARGV[3] the restart guard in whole seconds ("0": off)
-- Reply {1, 0} the record says ARGV[1] (written now where it was missing, its time
-- renewed), {0, n} it says n: another holder counts another number of permits, {-1, wait}
-- the server started less than the guard ago, so it may have forgotten another holder's
-- record: it abstains for wait more milliseconds, as acquire does.
local abstain = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return {-1, abstain}
end
local n = redis.call('GET', KEYS[1])
if n and n ~= ARGV[1] then
  return {0, tonumber(n) or -1}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0}
