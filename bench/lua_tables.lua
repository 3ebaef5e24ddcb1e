-- bench/lua_tables.lua: a table- and string-heavy lua workload for
-- bench/access_dhat_cmd.py, its work linear in its one argument (rounds): each round
-- builds 2000 records with string keys and a tag table each, sorts them, concatenates
-- every tenth into one string, indexes them by key and looks each key up.
local rounds = tonumber(arg[1]) or 10
local total = 0
for round = 1, rounds do
  local t = {}
  for i = 1, 2000 do
    t[i] = { name = "key" .. ((i * 7919) % 2000), value = i * round,
             tags = { "a" .. i, "b" .. (i % 13) } }
  end
  table.sort(t, function(a, b) return a.name < b.name end)
  local parts = {}
  for i = 1, #t, 10 do parts[#parts + 1] = t[i].name .. "=" .. t[i].value end
  total = total + #table.concat(parts, ",")
  local idx = {}
  for i = 1, #t do idx[t[i].name] = t[i] end
  for i = 1, 2000 do
    local r = idx["key" .. (i % 2000)]
    if r then total = total + r.value % 7 end
  end
end
print(total)
