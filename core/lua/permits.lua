-- permits: the number of permits of a semaphore, on which all its holders must agree.
-- KEYS[1] the semaphore's permits key
-- ARGV[1] our number of permits (a decimal), ARGV[2] how long the record is kept (ms)
-- Reply {1, 0} the record says ARGV[1] (written now where it was missing, its time
-- renewed), {0, n} it says n: another holder counts another number of permits.
local n = redis.call('GET', KEYS[1])
if n and n ~= ARGV[1] then
  return {0, tonumber(n) or -1}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0}
