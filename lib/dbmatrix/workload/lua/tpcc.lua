#!/usr/bin/env sysbench
-- TPC-C workload for sysbench 1.0.20 (dbmatrix), written from the TPC-C Standard Specification
-- revision 5.11: schema (clause 1), the five transactions (2.4-2.8) with their input rules, the
-- mix of 5.2.3 (45/43/4/4/4), NURand with run-time constants (2.1.6), the initial population
-- (4.3.3) and the consistency conditions (3.3.2). No keying or think times: a database benchmark.
--
--   sysbench tpcc.lua --db-driver=mysql --mysql-socket=S --scale=W --tables=N --threads=T prepare
--   sysbench tpcc.lua ... --time=60 --report-interval=1 --rand-type=uniform --trx_level=RC run
--   sysbench tpcc.lua ... check          (consistency conditions; exit status 1 if one fails)
--   sysbench tpcc.lua ... cleanup
--   sysbench tpcc.lua selftest           (random-value rules, no database needed)
--
-- Every table carries the table-set number: warehouse1, district1, ..., item1, stock1.
-- The warehouse of each transaction comes from sysbench's --rand-type generator; customer and item
-- ids use NURand as the spec says. `run` ends with a "TPC-C statistics:" block (per type counts and
-- tpmC = New-Order commits per minute) after sysbench's own report.

local ffi = require("ffi")

local function script_dir()
   local p = sysbench.cmdline.script_path
   if p == nil or p == "" then
      p = debug.getinfo(1, "S").source:gsub("^@", "")
   end
   return p:match("^(.*)/[^/]*$") or "."
end

local DIR = script_dir()

local function load_part(name, ...)
   local f, err = loadfile(DIR .. "/" .. name)
   if f == nil then error("cannot load " .. DIR .. "/" .. name .. ": " .. tostring(err)) end
   return f(...)
end

local lib = load_part("tpcc_lib.lua")
local loader = load_part("tpcc_load.lua", lib)
local txn = load_part("tpcc_txn.lua", lib)
local checks = load_part("tpcc_check.lua", lib)

pcall(ffi.cdef, "int usleep(unsigned int usec);")

sysbench.cmdline.options = {
   scale = { "Warehouses per table set (the TPC-C scale factor)", 1 },
   tables = { "Number of table sets (each a whole TPC-C database: warehouse1, district1, ...)", 1 },
   trx_level = { "Isolation level: RC, RR, RU or SER (MyRocks supports RC and RR)", "RC" },
   mysql_storage_engine = { "Storage engine string pasted into CREATE TABLE (may carry table options)",
      "innodb" },
   use_fk = { "Create the foreign keys of clause 1.3 (InnoDB only)", false },
   conditions = { "Consistency conditions the check command verifies (1-9, or all)", { "1", "2", "3", "4" } },
   strings = { "a-strings: random (TPC-C 4.3.2.2, incompressible) or compressible (slices of a fixed "
      .. "256-character string; lz4 about 3x)", "random" },
}

if sysbench.cmdline.command == nil then
   error("Command is required. Supported commands: prepare, run, check, cleanup, selftest, help")
end

-- ---------------------------------------------------------------------------------------------
-- Options

local function is_rocksdb()
   return sysbench.opt.mysql_storage_engine:lower():find("rocksdb", 1, true) ~= nil
end

local function int_option(name, minimum)
   local v = sysbench.opt[name]
   if type(v) ~= "number" or v ~= math.floor(v) or v < minimum then
      error(string.format("--%s must be an integer >= %d, got %s", name, minimum, tostring(v)), 0)
   end
   return v
end

local function options()
   local o = {
      scale = int_option("scale", 1),
      sets = int_option("tables", 1),
      trx_level = tostring(sysbench.opt.trx_level):upper(),
      engine = sysbench.opt.mysql_storage_engine,
      use_fk = sysbench.opt.use_fk,
      strings = tostring(sysbench.opt.strings),
   }
   lib.set_strings(o.strings)
   if lib.ISOLATION[o.trx_level] == nil then
      error("--trx_level must be one of RC, RR, RU, SER, got " .. tostring(sysbench.opt.trx_level), 0)
   end
   if is_rocksdb() then
      if o.trx_level ~= "RC" and o.trx_level ~= "RR" then
         error("--trx_level=" .. o.trx_level .. ": MyRocks supports only RC and RR", 0)
      end
      if o.use_fk then
         error("--use_fk: MyRocks has no foreign keys; use --use_fk=off with rocksdb", 0)
      end
   end
   return o
end

local function set_isolation(con, level)
   con:query("SET SESSION TRANSACTION ISOLATION LEVEL " .. lib.ISOLATION[level])
end

local function all_table_names(sets)
   local names = {}
   for s = 1, sets do
      for _, t in ipairs(lib.TABLES) do names[#names + 1] = "'" .. t .. s .. "'" end
   end
   return names
end

--- load-time C for C_LAST of every set, from CUSTOMER's table comment
local function read_c_load(con, sets)
   local c_load = {}
   local rs = con:query("SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES "
      .. "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'customer%'")
   for _ = 1, (rs ~= nil and rs.nrows or 0) do
      local r = rs:fetch_row()
      local s = tonumber(r[1]:match("^customer(%d+)$"))
      local c = r[2] and r[2]:match(lib.C_LOAD_COMMENT .. "(%d+)")
      if s and c then c_load[s] = tonumber(c) end
   end
   for s = 1, sets do
      if c_load[s] == nil then
         error(string.format("table set %d is not loaded (no customer%d with a '%s' comment): run prepare "
            .. "with this script first", s, s, lib.C_LOAD_COMMENT), 0)
      end
   end
   return c_load
end

--- the database must hold exactly --scale warehouses in every set
local function verify_scale(con, o)
   local present = {}
   local rs = con:query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
      .. "AND TABLE_NAME IN (" .. table.concat(all_table_names(o.sets), ",") .. ")")
   for _ = 1, (rs ~= nil and rs.nrows or 0) do
      present[rs:fetch_row()[1]] = true
   end
   for s = 1, o.sets do
      for _, t in ipairs(lib.TABLES) do
         if not present[t .. s] then
            error(string.format("table set %d is not loaded (no table %s%d in this database): run prepare "
               .. "with --tables=%d first", s, t, s, o.sets), 0)
         end
      end
   end
   for s = 1, o.sets do
      local n = tonumber(con:query_row(string.format("SELECT COUNT(*) FROM warehouse%d", s)))
      if n ~= o.scale then
         error(string.format("table set %d holds %d warehouses but --scale=%d: use the scale it was "
            .. "prepared with", s, n, o.scale), 0)
      end
   end
end

-- ---------------------------------------------------------------------------------------------
-- prepare (parallel: every thread takes its share of the load units)

local function create_set(con, o, s)
   print(string.format("Creating TPC-C tables of set %d (%s)...", s, o.engine))
   local c_load = sysbench.rand.uniform(0, 255)
   for _, name in ipairs(lib.TABLES) do
      con:query(lib.create_table_sql(name, s, o.engine, o.use_fk, c_load))
   end
end

local function wait_for_tables(con, o)
   local want = 9 * o.sets
   local q = "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
      .. "TABLE_NAME IN (" .. table.concat(all_table_names(o.sets), ",") .. ")"
   local deadline = os.time() + 600
   while tonumber(con:query_row(q)) < want do
      if os.time() > deadline then
         error("prepare: the TPC-C tables were not created within 600 s (did another thread fail?)", 0)
      end
      ffi.C.usleep(100000)
   end
end

local function prepare_thread()
   local o = options()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   con:query("SET SESSION foreign_key_checks = 0")
   con:query("SET SESSION unique_checks = 0")
   local tid, threads = sysbench.tid, sysbench.opt.threads
   for s = 1, o.sets do
      if (s - 1) % threads == tid then create_set(con, o, s) end
   end
   wait_for_tables(con, o)
   local c_load = read_c_load(con, o.sets)
   local plan = loader.assign(loader.units(o.sets, o.scale), threads)
   local t0 = lib.now()
   for _, u in ipairs(plan[tid]) do
      if u.kind == "warehouse" then
         print(string.format("Loading warehouse %d of table set %d (thread %d)...", u.w, u.set, tid))
      end
      loader.load_unit(con, u, c_load)
   end
   print(string.format("Thread %d loaded %d units in %.1f s", tid, #plan[tid], lib.now() - t0))
   con:disconnect()
end

-- sysbench 1.0.20 ignores a failing parallel command (exit status 0, the other threads go on
-- waiting or loading): report the error and end the process with status 1 instead.
function cmd_prepare()
   local ok, err = pcall(prepare_thread)
   if not ok then
      if type(err) == "table" then
         err = string.format("SQL error %s: %s", tostring(err.sql_errno), tostring(err.sql_errmsg))
      end
      io.stdout:flush()
      io.stderr:write(string.format("FATAL: TPC-C prepare failed in thread %d: %s\n", sysbench.tid,
         tostring(err)))
      io.stderr:flush()
      os.exit(1)
   end
end

-- ---------------------------------------------------------------------------------------------
-- cleanup, check, selftest

function cmd_cleanup()
   local o = options()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   con:query("SET SESSION foreign_key_checks = 0")
   for s = 1, o.sets do
      print(string.format("Dropping TPC-C tables of set %d...", s))
      for _, t in ipairs(lib.drop_order(s)) do
         con:query("DROP TABLE IF EXISTS " .. t)
      end
   end
end

function cmd_check()
   local o = options()
   local ids = checks.parse_ids(sysbench.opt.conditions)
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   verify_scale(con, o)
   local ok = checks.run(con, ids, o.sets, o.scale)
   con:disconnect()
   return ok
end

function cmd_selftest()
   local test = load_part("tpcc_selftest.lua", lib, loader, checks)
   return test()
end

sysbench.cmdline.commands = {
   prepare = { cmd_prepare, sysbench.cmdline.PARALLEL_COMMAND },
   cleanup = { cmd_cleanup },
   check = { cmd_check },
   selftest = { cmd_selftest },
}

-- ---------------------------------------------------------------------------------------------
-- run

local STATS -- the main state's pointer to the shared counters (see done())

--- run constants per set: "set:c_load:c_last:c_id:ol_i_id;..." (the same for all threads)
local function encode_constants(cs)
   local parts = {}
   for s, c in ipairs(cs) do
      parts[#parts + 1] = string.format("%d:%d:%d:%d:%d", s, c.c_load, c.c_last, c.c_id, c.ol_i_id)
   end
   return table.concat(parts, ";")
end

local function decode_constants(text)
   local cs = {}
   for s, cl, c_last, c_id, ol in text:gmatch("(%d+):(%d+):(%d+):(%d+):(%d+)") do
      cs[tonumber(s)] = { c_load = tonumber(cl), c_last = tonumber(c_last), c_id = tonumber(c_id),
                          ol_i_id = tonumber(ol) }
   end
   return cs
end

-- Runs once in sysbench's main Lua state before the worker threads start.
function init()
   if sysbench.cmdline.command ~= "run" then return end
   local o = options()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   verify_scale(con, o)
   local c_load = read_c_load(con, o.sets)
   con:disconnect()
   local cs = {}
   for s = 1, o.sets do
      -- 2.1.6: C for C_ID and OL_I_ID is any value in [0..A]; C_LAST's obeys the delta rule.
      cs[s] = { c_load = c_load[s], c_last = lib.pick_c_last_run(c_load[s]),
                c_id = sysbench.rand.uniform(0, 1023), ol_i_id = sysbench.rand.uniform(0, 8191) }
      print(string.format("TPC-C constants: set %d C_LAST load=%d run=%d delta=%d C_ID=%d OL_I_ID=%d", s,
         cs[s].c_load, cs[s].c_last, math.abs(cs[s].c_last - cs[s].c_load), cs[s].c_id, cs[s].ol_i_id))
   end
   print(string.format("TPC-C run: table_sets=%d warehouses=%d isolation=%s engine=%s mix=%s", o.sets,
      o.scale, o.trx_level, o.engine, table.concat(lib.MIX, "/")))
   lib.setenv(lib.CONST_ENV, encode_constants(cs))
   STATS = lib.stats_alloc(sysbench.opt.threads)
end

local con, st, ctxs, sets, level
local retry_type, cur_type
-- With --report-checkpoints=N (one process warms up, then measures), each thread zeroes its own
-- counters at its first event completing after N s, so the report covers the measured window only,
-- like sysbench's own counters and histogram after the checkpoint (N counts from thread_init, a few
-- ms before sysbench starts its clock).
local window_start

local function reset_stats(s, t)
   for i = 0, 4 do
      s.committed[i], s.rolled_back[i], s.retried[i], s.latency_s[i] = 0, 0, 0, 0
   end
   s.delivery_skipped, s.t_first, s.t_last = 0, t, 0
end

function thread_init()
   local o = options()
   sets, level = o.sets, o.trx_level
   local drv = sysbench.sql.driver()
   con = drv:connect()
   set_isolation(con, level)
   local base = lib.stats_attach()
   assert(base ~= nil, "TPC-C counters missing: init() did not run")
   st = base + sysbench.tid
   local cps = sysbench.opt.report_checkpoints
   local first_cp = type(cps) == "table" and tonumber(cps[1]) or nil
   window_start = first_cp and lib.now() + first_cp or nil
   local cs = decode_constants(os.getenv(lib.CONST_ENV) or "")
   local scale = o.scale
   local function pick_w()
      return sysbench.rand.default(1, scale)
   end
   ctxs = {}
   for s = 1, sets do
      ctxs[s] = { con = con, set = s, scale = scale, C = cs[s], pick_w = pick_w }
   end
end

function event()
   local t = retry_type or lib.pick_type()
   retry_type = nil
   cur_type = t
   local ctx = ctxs[sets == 1 and 1 or sysbench.rand.uniform(1, sets)]
   local t0 = lib.now()
   if st.t_first == 0 then st.t_first = t0 end
   local outcome, skipped = txn.BY_INDEX[t](ctx)
   local t1 = lib.now()
   if window_start ~= nil and t1 >= window_start then
      reset_stats(st, window_start)
      window_start = nil
   end
   local i = t - 1
   if outcome == "committed" then
      st.committed[i] = st.committed[i] + 1
      st.latency_s[i] = st.latency_s[i] + (t1 - t0)
   else
      st.rolled_back[i] = st.rolled_back[i] + 1
   end
   if skipped then st.delivery_skipped = st.delivery_skipped + skipped end
   st.t_last = t1
   cur_type = nil
end

-- An ignored error (deadlock, lock wait timeout, ...) restarts the event: undo what the failed
-- attempt did and run the same transaction type again, so retries do not skew the mix.
function sysbench.hooks.before_restart_event(errdesc)
   pcall(con.query, con, "ROLLBACK")
   local n = errdesc.sql_errno
   if n == 2013 or n == 2055 or n == 2006 or n == 2011 then -- reconnected: session settings are gone
      pcall(set_isolation, con, level)
   end
   if cur_type ~= nil then
      st.retried[cur_type - 1] = st.retried[cur_type - 1] + 1
      retry_type = cur_type
      cur_type = nil
   end
end

function thread_done()
   if con ~= nil then con:disconnect() end
end

-- Runs in the main state after sysbench's own report: sum every thread's counters.
function done()
   if sysbench.cmdline.command ~= "run" or STATS == nil then return end
   local sum = { committed = {}, rolled_back = {}, retried = {}, latency_s = {} }
   local first, last, skipped = math.huge, 0, 0
   for i = 0, 4 do
      for k in pairs(sum) do sum[k][i] = 0 end
   end
   for tid = 0, sysbench.opt.threads - 1 do
      local s = STATS[tid]
      for i = 0, 4 do
         for k in pairs(sum) do sum[k][i] = sum[k][i] + s[k][i] end
      end
      if s.t_first > 0 and s.t_first < first then first = s.t_first end
      if s.t_last > last then last = s.t_last end
      skipped = skipped + s.delivery_skipped
   end
   local elapsed = last > first and last - first or 0
   local out = { "TPC-C statistics:" }
   for i, name in ipairs(lib.TYPES) do
      local c = sum.committed[i - 1]
      out[#out + 1] = string.format("    %-13s committed: %d rolled_back: %d retried: %d avg_ms: %.3f", name .. ":",
         c, sum.rolled_back[i - 1], sum.retried[i - 1], c > 0 and sum.latency_s[i - 1] / c * 1000 or 0)
   end
   out[#out + 1] = string.format("    delivery skipped districts: %d", skipped)
   out[#out + 1] = string.format("    measured time: %.4fs", elapsed)
   out[#out + 1] = string.format("    tpmC: %.2f (New-Order commits per minute)",
      elapsed > 0 and sum.committed[0] / elapsed * 60 or 0)
   io.stdout:write(table.concat(out, "\n") .. "\n\n")
   io.stdout:flush()
end
