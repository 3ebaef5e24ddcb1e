-- bench/watch_real: a table- and string-heavy Lua workload. A big table of strings built
-- once and never read again (cold), a small table of strings read and rewritten in a
-- loop (hot), and short-lived tables churned every round. Usage: lua tables.lua N SECONDS
-- [ROUNDS]: with ROUNDS, exactly that many rounds whatever the time (the same work under
-- valgrind as in a timed run); prints acc, #cold and the rounds run.
local N = tonumber(arg[1]) or 200000
local secs = tonumber(arg[2]) or 5
local rounds = tonumber(arg[3])
local cold = {}
for i = 1, N do cold[i] = string.rep("c", 40) .. i end
local hot = {}
for i = 1, 2000 do hot[i] = string.rep("h", 24) .. i end
local t0, acc, r = os.clock(), 0, 0
while (rounds and r < rounds) or (not rounds and os.clock() - t0 < secs) do
  r = r + 1
  for i = 1, #hot do
    local s = hot[i]
    acc = acc + #s + s:byte(1 + i % #s)
    if i % 97 == 0 then hot[i] = s:sub(1, 24) .. (acc % 1000) end
  end
  local tmp = {}
  for j = 1, 300 do tmp[j] = { j, tostring(j) } end
  acc = acc + #tmp
end
print(acc, #cold, r)
