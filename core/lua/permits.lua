-- permits: KEYS[1] permits key; ARGV[1] permits (a decimal), ARGV[2] how long the record is
-- kept (ms), ARGV[3] restart guard s ("0": off).
-- Replies: {1, 0} the record says ARGV[1] (written if missing, renewed); {0, n} it says n;
-- {-1, wait} the guard abstains for wait ms.
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
