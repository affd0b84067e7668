-- acquireset: every name's six keys as acquire's KEYS[1] .. KEYS[6], name after name, in
-- order; ARGV and replies as a lock's acquire ({1, fence}: every name taken, one fence).
local abstain, unguarded = guarded(tonumber(ARGV[3]) or 0)
if abstain then
  return vote(-1, abstain)
end
local token, waiter, names, list, wait, blocked = ARGV[1], ARGV[5], {}, ' s', 0, false
for j = 1, #KEYS, 6 do
  local k = keys_of(KEYS[j])
  names[#names + 1], list = k, list .. ' ' .. #k.lock .. ' ' .. k.lock
  local holder = redis.call('GET', k.lock)
  if holder and not ours(holder, token) then
    local r = remaining(k.lock)
    blocked, wait = true, (wait < 0 or r < 0) and -1 or math.max(wait, r)
  elseif not holder and ahead(k.queue, k.alive, k.waiters, waiter, tonumber(ARGV[6])) then
    blocked = true
  end
end
if waiter ~= '' and gone(names[1].alive, waiter) then
  return vote(0, wait)
elseif blocked then -- queued as one waiter in every name's queue, its set recorded
  local reg = waiter ~= '' and table.concat({token, ARGV[2], string.match(ARGV[4], '^%d+$') or '1', tonumber(ARGV[3]) or 0}, ' ') .. list
  for _, k in ipairs(reg and names or {}) do
    enqueue(k.queue, k.alive, k.waiters, waiter, ARGV[6], tonumber(ARGV[7]), reg)
  end
  return vote(0, wait)
end
return vote(1, take_set(names, waiter, token, ARGV[2], ARGV[4]), unguarded)
