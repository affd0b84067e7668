-- rextend: KEYS per name its lock and readers key (a set's: name after name); ARGV[1] token,
-- ARGV[2] TTL ms. Replies: {1} renewed; {0} our entry of a name is gone or out of time, or
-- readers do not hold it (nothing changed).
for i = 1, #KEYS, 2 do
  local score = redis.call('ZSCORE', KEYS[i + 1], ARGV[1])
  if not score or tonumber(score) <= now_ms() or redis.call('GET', KEYS[i]) ~= readers_hold then
    return {0}
  end
end
for i = 1, #KEYS, 2 do
  read_grant(KEYS[i], KEYS[i + 1], ARGV[1], ARGV[2], true)
end
return {1}
