-- identify: name the server, so that two Nodes that reach one server are not counted as
-- two votes. KEYS[1] any key (on Redis Cluster it picks the shard that answers).
-- Reply {1, a, b, c, d}: the server's run_id (40 hex digits, random per server process) as
-- four numbers of 10 hex digits each; {0} if the server does not report one (miniredis).
local info = redis.pcall('INFO', 'server')
local id = type(info) == 'string' and string.match(info, 'run_id:(%x+)')
if not id or #id ~= 40 then
  return {0}
end
local parts = {1}
for i = 1, 40, 10 do
  parts[#parts + 1] = tonumber(string.sub(id, i, i + 9), 16)
end
return parts
