-- status: reads, and writes nothing. KEYS[1..8] a lock's lock key, fence counter, queue,
-- alive, waiters and readers keys, its election's record and its semaphore's record of its
-- number of permits K; if more follow, the semaphore's fence counter, queue, alive and
-- waiters keys, then its K permits. Replies (read with EvalStrings): the server time in ms,
-- its run_id (false: none), the lock key and its PTTL, the fence counter, the election's
-- record and its PTTL, the semaphore's record (false for a key that does not exist); then the
-- queue, alive, waiters and readers keys as a count and that many elements (ZRANGE WITHSCORES:
-- member, score; HGETALL: field, value); then, with a semaphore's keys, its fence counter, its
-- queue, alive and waiters keys so, and per permit its holder (false: free) and its PTTL.
local t = redis.call('TIME')
local info = redis.pcall('INFO', 'server')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
  type(info) == 'string' and string.match(info, 'run_id:(%x+)') or false}
local function get(k) out[#out + 1] = redis.call('GET', k) end
local function pttl(k) out[#out + 1] = redis.call('PTTL', k) end
local function list(items)
  out[#out + 1] = #items
  for _, v in ipairs(items) do
    out[#out + 1] = v
  end
end
local function queue(first) -- queue, alive and waiters keys from KEYS[first]
  list(redis.call('ZRANGE', KEYS[first], 0, -1, 'WITHSCORES'))
  list(redis.call('ZRANGE', KEYS[first + 1], 0, -1, 'WITHSCORES'))
  list(redis.call('HGETALL', KEYS[first + 2]))
end
get(KEYS[1])
pttl(KEYS[1])
get(KEYS[2])
get(KEYS[7])
pttl(KEYS[7])
get(KEYS[8])
queue(3)
list(redis.call('ZRANGE', KEYS[6], 0, -1, 'WITHSCORES'))
if #KEYS > 8 then
  get(KEYS[9])
  queue(10)
  for i = 13, #KEYS do
    get(KEYS[i])
    pttl(KEYS[i])
  end
end
return out
