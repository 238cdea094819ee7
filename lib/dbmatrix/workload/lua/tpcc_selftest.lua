-- `sysbench tpcc.lua selftest`: checks of the random-value rules and the load plan, no database.
-- Prints one line per failed check and a summary; returns true when everything holds.

local lib, loader, checks = ...
local uniform = sysbench.rand.uniform
local fmt = string.format

return function()
   local n, failed = 0, {}
   local function ok(cond, msg)
      n = n + 1
      if not cond then failed[#failed + 1] = msg end
   end

   -- 4.3.2.3 C_LAST from syllables
   ok(lib.last_name(0) == "BARBARBAR", "last_name(0) = " .. lib.last_name(0))
   ok(lib.last_name(371) == "PRICALLYOUGHT", "last_name(371) = " .. lib.last_name(371))
   ok(lib.last_name(999) == "EINGEINGEING", "last_name(999) = " .. lib.last_name(999))
   local names = {}
   for i = 0, 999 do names[lib.last_name(i)] = true end
   local distinct = 0
   for _ in pairs(names) do distinct = distinct + 1 end
   ok(distinct == 1000, fmt("1000 distinct last names, got %d", distinct))

   -- 2.1.6 NURand: within [x..y], covering it, and non-uniform
   for _, case in ipairs({ { 255, 0, 999 }, { 1023, 1, 3000 }, { 8191, 1, 100000 } }) do
      local A, x, y = case[1], case[2], case[3]
      local C = uniform(0, A)
      local lo, hi, counts = math.huge, -math.huge, {}
      local samples = 200000
      for _ = 1, samples do
         local v = lib.nurand(A, x, y, C)
         if v < lo then lo = v end
         if v > hi then hi = v end
         counts[v] = (counts[v] or 0) + 1
      end
      ok(lo >= x and hi <= y, fmt("NURand(%d,%d,%d) out of range: %d..%d", A, x, y, lo, hi))
      local span = y - x + 1
      ok(lo <= x + span * 0.01 and hi >= y - span * 0.01, fmt("NURand(%d,%d,%d) covers only %d..%d", A, x, y, lo, hi))
      local top = 0
      for _, c in pairs(counts) do
         if c > top then top = c end
      end
      -- the hottest value is far more frequent than under a uniform draw
      ok(top > 3 * samples / span, fmt("NURand(%d,%d,%d) looks uniform: top count %d", A, x, y, top))
   end

   -- 2.1.6.1 the C_LAST delta rule
   ok(lib.c_last_delta_ok(0, 65) and lib.c_last_delta_ok(200, 81) and lib.c_last_delta_ok(119, 0),
      "delta 65/119 must be accepted")
   ok(not lib.c_last_delta_ok(0, 64) and not lib.c_last_delta_ok(0, 120), "delta 64/120 must be refused")
   ok(not lib.c_last_delta_ok(100, 4) and not lib.c_last_delta_ok(0, 112), "delta 96/112 must be refused")
   for c_load = 0, 255 do
      local c = lib.pick_c_last_run(c_load)
      ok(c >= 0 and c <= 255 and lib.c_last_delta_ok(c, c_load), fmt("C_LAST run %d for load %d", c, c_load))
   end

   -- 4.3.2.2 strings
   local bad_len, bad_chr = 0, 0
   for _ = 1, 2000 do
      local s = lib.astring(8, 16)
      if #s < 8 or #s > 16 then bad_len = bad_len + 1 end
      if s:find("[^%w]") then bad_chr = bad_chr + 1 end
   end
   ok(bad_len == 0 and bad_chr == 0, fmt("a-string [8..16]: %d bad lengths, %d bad chars", bad_len, bad_chr))
   -- --strings=compressible: a-strings are slices of one fixed corpus (same lengths, same characters)
   lib.set_strings("compressible")
   local slices, bad = {}, 0
   for _ = 1, 2000 do
      local c = lib.astring(24)
      if #c ~= 24 or c:find("[^%w]") then bad = bad + 1 end
      slices[c] = true
   end
   local long = lib.astring(300, 500)
   lib.set_strings("random")
   local distinct = 0
   for _ in pairs(slices) do distinct = distinct + 1 end
   ok(bad == 0 and #long >= 300 and not long:find("[^%w]"), fmt("compressible a-string: %d bad", bad))
   ok(distinct <= lib.CORPUS_LEN, fmt("compressible a-strings of 24: %d distinct, at most %d (one per offset)",
      distinct, lib.CORPUS_LEN))
   ok(long:sub(lib.CORPUS_LEN + 1, lib.CORPUS_LEN + 24) == long:sub(1, 24),
      "a compressible a-string longer than the corpus repeats it")
   ok(not pcall(lib.set_strings, "zeros"), "--strings=zeros must be refused")
   local s = lib.nstring(16)
   ok(#s == 16 and not s:find("%D"), "n-string 16: " .. s)
   ok(lib.zip():match("^%d%d%d%d11111$") ~= nil, "zip must be 4 digits and 11111")
   local orig, trials, bad_data = 0, 20000, 0
   for _ = 1, trials do
      local d = lib.data_string()
      if #d < 26 or #d > 50 then bad_data = bad_data + 1 end
      if d:find("ORIGINAL", 1, true) then orig = orig + 1 end
   end
   ok(bad_data == 0, fmt("I_DATA/S_DATA length out of 26..50 %d times", bad_data))
   ok(orig > trials * 0.08 and orig < trials * 0.12, fmt("ORIGINAL in %.1f %% of rows, want ~10", orig / trials * 100))
   for _ = 1, 1000 do
      local d = lib.decimal(0, 0.2, 4)
      local v = tonumber(d)
      if not (v >= 0 and v <= 0.2 and d:match("^%d%.%d%d%d%d$")) then
         ok(false, "decimal(0, 0.2, 4) gave " .. d)
         break
      end
   end

   -- O_C_ID permutation
   local p, seen, good = lib.permutation(3000), {}, true
   for i = 1, 3000 do
      if seen[p[i]] or p[i] < 1 or p[i] > 3000 then good = false end
      seen[p[i]] = true
   end
   ok(good and #p == 3000, "permutation(3000) is not a permutation of 1..3000")

   -- 5.2.3 mix: at least 43 % Payment and 4 % each of Order-Status, Delivery and Stock-Level; we use
   -- 45/43/4/4/4 (checked against these numbers, not against lib.MIX)
   local picks, total = { 0, 0, 0, 0, 0 }, 100000
   for _ = 1, total do
      local t = lib.pick_type()
      picks[t] = picks[t] + 1
   end
   for i, pct in ipairs({ 45, 43, 4, 4, 4 }) do
      ok(math.abs(picks[i] / total * 100 - pct) < 1, fmt("%s share %.2f %%, want %d", lib.TYPES[i],
         picks[i] / total * 100, pct))
   end

   -- other warehouse
   for _ = 1, 1000 do
      local w = lib.other_warehouse(3, 5)
      if w == 3 or w < 1 or w > 5 then
         ok(false, "other_warehouse(3, 5) gave " .. w)
         break
      end
   end
   ok(lib.other_warehouse(1, 1) == 1, "other_warehouse with one warehouse must be the home one")

   -- load plan: every unit exactly once, balanced
   local units = loader.units(2, 3)
   ok(#units == 2 * (4 + 3 * (1 + 4 + 10)), fmt("units(2, 3): %d", #units))
   local plan = loader.assign(units, 3)
   local count, costs, maxcost = 0, {}, 0
   for t = 0, 2 do
      costs[t] = 0
      for _, u in ipairs(plan[t]) do
         count = count + 1
         costs[t] = costs[t] + u.cost
         if u.cost > maxcost then maxcost = u.cost end
      end
   end
   ok(count == #units, "load plan drops or repeats units")
   local lo_c, hi_c = math.min(costs[0], costs[1], costs[2]), math.max(costs[0], costs[1], costs[2])
   ok(hi_c - lo_c <= maxcost, fmt("load plan unbalanced: %.1f..%.1f", lo_c, hi_c))

   -- DDL and conditions
   local ddl = lib.create_table_sql("customer", 7, "rocksdb", false, 123)
   ok(ddl:find("CREATE TABLE customer7 ", 1, true) and ddl:find("ENGINE = rocksdb", 1, true)
      and ddl:find(lib.C_LOAD_COMMENT .. "123", 1, true), "customer DDL: " .. ddl)
   ok(lib.create_table_sql("stock", 2, "InnoDB", true, 0):find("REFERENCES item2 (i_id)", 1, true) ~= nil,
      "stock DDL with foreign keys")
   ok(#checks.parse_ids({ "all" }) == #checks.CONDITIONS, "conditions 'all'")
   ok(not pcall(checks.parse_ids, { "42" }), "condition 42 must be refused")

   for _, msg in ipairs(failed) do
      print("selftest FAIL: " .. msg)
   end
   print(fmt("TPC-C selftest: %s (%d checks, %d failed)", #failed == 0 and "PASS" or "FAIL", n, #failed))
   return #failed == 0
end
