-- TPC-C for sysbench 1.0.20: constants, random-value rules and schema (dbmatrix).
--
-- Written from the TPC-C Standard Specification, revision 5.11 (clauses 1, 2.1.6, 4.3.2, 4.3.3).
-- Pure helpers: no database access here, so `sysbench tpcc.lua selftest` can check them.

local ffi = require("ffi")
local bit = require("bit")

local M = {}

M.TYPES = { "new_order", "payment", "order_status", "delivery", "stock_level" }
-- Clause 5.2.3 minimums are 43 % Payment and 4 % for each of the three others; New-Order is the rest.
M.MIX = { 45, 43, 4, 4, 4 }

M.ITEMS = 100000          -- 4.3.3.1: ITEM and STOCK cardinality
M.DISTRICTS = 10          -- districts per warehouse
M.CUSTOMERS = 3000        -- customers per district
M.ORDERS = 3000           -- initial orders per district
M.FIRST_NEW_ORDER = 2101  -- the last 900 initial orders are in NEW_ORDER
M.UNUSED_ITEM = M.ITEMS + 1

M.TABLES = { "warehouse", "district", "customer", "history", "new_order", "orders", "order_line",
             "item", "stock" }

M.ISOLATION = {
   RC = "READ COMMITTED", RR = "REPEATABLE READ", RU = "READ UNCOMMITTED", SER = "SERIALIZABLE",
}

-- 4.3.2.3: C_LAST syllables, indexed by digit + 1.
M.SYLLABLES = { "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING" }

local uniform = sysbench.rand.uniform
local floor = math.floor

-- ---------------------------------------------------------------------------------------------
-- Random values (2.1.5, 2.1.6, 4.3.2)

--- C_LAST for a number 0..999: the syllables of its three digits.
function M.last_name(n)
   local s = M.SYLLABLES
   return s[floor(n / 100) + 1] .. s[floor(n / 10) % 10 + 1] .. s[n % 10 + 1]
end

--- NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x  (2.1.6)
function M.nurand(A, x, y, C)
   return (bit.bor(uniform(0, A), uniform(x, y)) + C) % (y - x + 1) + x
end

--- 2.1.6.1: the run-time C for C_LAST must differ from the load-time one by 65..119, not 96 or 112.
function M.c_last_delta_ok(c_run, c_load)
   local d = math.abs(c_run - c_load)
   return d >= 65 and d <= 119 and d ~= 96 and d ~= 112
end

function M.pick_c_last_run(c_load)
   local c
   repeat
      c = uniform(0, 255)
   until M.c_last_delta_ok(c, c_load)
   return c
end

local ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
local ALNUM_BYTES = ffi.new("uint8_t[62]")
ffi.copy(ALNUM_BYTES, ALNUM, 62)
local buf = ffi.new("uint8_t[512]")

-- --strings=compressible: every a-string is a slice, at a random offset, of one fixed alphanumeric string
-- of CORPUS_LEN characters, so that blocks of rows hold repeated substrings a block compressor finds
-- (lz4 shrinks the data about 3x at 16 KB blocks). TPC-C's own random a-strings (4.3.2.2, the default
-- --strings=random) do not compress under lz4; seed 003's sysbench-TPCC data compressed about 4x.
M.STRING_MODES = { random = true, compressible = true }
M.CORPUS_LEN = 256
local CORPUS = ffi.new("uint8_t[?]", M.CORPUS_LEN + 512)
do
   local x = 12345  -- a fixed LCG: the same corpus on every host and run, whatever sysbench's seed
   for i = 0, M.CORPUS_LEN + 511 do
      if i < M.CORPUS_LEN then
         x = (x * 1103515245 + 12345) % 2147483648
         CORPUS[i] = ALNUM_BYTES[math.floor(x / 65536) % 62]
      else
         CORPUS[i] = CORPUS[i % M.CORPUS_LEN]  -- wrap, so a slice longer than the corpus repeats it
      end
   end
end
local string_mode = "random"

function M.set_strings(mode)
   if not M.STRING_MODES[mode] then
      error("--strings must be random or compressible, got " .. tostring(mode), 0)
   end
   string_mode = mode
end

--- random a-string [lo .. hi]: random alphanumeric characters, random length (4.3.2.2); with
--- --strings=compressible a slice of the fixed corpus instead (see above)
function M.astring(lo, hi)
   local n = uniform(lo, hi or lo)
   if string_mode == "compressible" then
      return ffi.string(CORPUS + uniform(0, M.CORPUS_LEN - 1), n)
   end
   for i = 0, n - 1 do
      buf[i] = ALNUM_BYTES[uniform(0, 61)]
   end
   return ffi.string(buf, n)
end

--- random n-string [lo .. hi]: random digits
function M.nstring(lo, hi)
   local n = uniform(lo, hi or lo)
   for i = 0, n - 1 do
      buf[i] = 48 + uniform(0, 9)
   end
   return ffi.string(buf, n)
end

--- I_DATA / S_DATA: a-string [26..50]; in 10 % of rows "ORIGINAL" at a random position (4.3.3.1)
function M.data_string()
   local s = M.astring(26, 50)
   if uniform(1, 10) == 1 then
      local p = uniform(0, #s - 8)
      s = s:sub(1, p) .. "ORIGINAL" .. s:sub(p + 9)
   end
   return s
end

--- zip: 4 random digits followed by "11111" (4.3.2.7)
function M.zip()
   return M.nstring(4) .. "11111"
end

--- a random permutation of 1..n (Fisher-Yates), for O_C_ID at load time
function M.permutation(n)
   local p = {}
   for i = 1, n do p[i] = i end
   for i = n, 2, -1 do
      local j = uniform(1, i)
      p[i], p[j] = p[j], p[i]
   end
   return p
end

--- random fixed-point value lo..hi with `scale` decimals, as a string (e.g. 0.0000..0.2000)
function M.decimal(lo, hi, scale)
   local m = 10 ^ scale
   return string.format("%." .. scale .. "f", uniform(floor(lo * m + 0.5), floor(hi * m + 0.5)) / m)
end

--- a transaction type index by the mix (cumulative percentages)
function M.pick_type()
   local r = uniform(1, 100)
   local acc = 0
   for i, pct in ipairs(M.MIX) do
      acc = acc + pct
      if r <= acc then return i end
   end
   return #M.MIX
end

--- a warehouse other than w among 1..scale (uniform); w itself when there is only one
function M.other_warehouse(w, scale)
   if scale <= 1 then return w end
   local r = uniform(1, scale - 1)
   if r >= w then r = r + 1 end
   return r
end

--- quote a string for SQL (values we generate are alphanumeric; this keeps c_data edits safe)
function M.sql_str(s)
   return "'" .. s:gsub("\\", "\\\\"):gsub("'", "''") .. "'"
end

-- ---------------------------------------------------------------------------------------------
-- Schema (clause 1.3). Counters and YTD columns are wider than the spec's minimum sizes so that
-- long runs at small scale cannot overflow them.

local DDL = {
   warehouse = [[
CREATE TABLE warehouse%d (
  w_id INT NOT NULL,
  w_name VARCHAR(10) NOT NULL,
  w_street_1 VARCHAR(20) NOT NULL,
  w_street_2 VARCHAR(20) NOT NULL,
  w_city VARCHAR(20) NOT NULL,
  w_state CHAR(2) NOT NULL,
  w_zip CHAR(9) NOT NULL,
  w_tax DECIMAL(4,4) NOT NULL,
  w_ytd DECIMAL(14,2) NOT NULL,
  PRIMARY KEY (w_id)
)]],
   district = [[
CREATE TABLE district%d (
  d_id TINYINT NOT NULL,
  d_w_id INT NOT NULL,
  d_name VARCHAR(10) NOT NULL,
  d_street_1 VARCHAR(20) NOT NULL,
  d_street_2 VARCHAR(20) NOT NULL,
  d_city VARCHAR(20) NOT NULL,
  d_state CHAR(2) NOT NULL,
  d_zip CHAR(9) NOT NULL,
  d_tax DECIMAL(4,4) NOT NULL,
  d_ytd DECIMAL(14,2) NOT NULL,
  d_next_o_id INT NOT NULL,
  PRIMARY KEY (d_w_id, d_id)%s
)]],
   customer = [[
CREATE TABLE customer%d (
  c_id INT NOT NULL,
  c_d_id TINYINT NOT NULL,
  c_w_id INT NOT NULL,
  c_first VARCHAR(16) NOT NULL,
  c_middle CHAR(2) NOT NULL,
  c_last VARCHAR(16) NOT NULL,
  c_street_1 VARCHAR(20) NOT NULL,
  c_street_2 VARCHAR(20) NOT NULL,
  c_city VARCHAR(20) NOT NULL,
  c_state CHAR(2) NOT NULL,
  c_zip CHAR(9) NOT NULL,
  c_phone CHAR(16) NOT NULL,
  c_since DATETIME NOT NULL,
  c_credit CHAR(2) NOT NULL,
  c_credit_lim DECIMAL(12,2) NOT NULL,
  c_discount DECIMAL(4,4) NOT NULL,
  c_balance DECIMAL(14,2) NOT NULL,
  c_ytd_payment DECIMAL(14,2) NOT NULL,
  c_payment_cnt INT NOT NULL,
  c_delivery_cnt INT NOT NULL,
  c_data VARCHAR(500) NOT NULL,
  PRIMARY KEY (c_w_id, c_d_id, c_id),
  KEY idx_customer_name (c_w_id, c_d_id, c_last, c_first)%s
)]],
   history = [[
CREATE TABLE history%d (
  h_c_id INT NOT NULL,
  h_c_d_id TINYINT NOT NULL,
  h_c_w_id INT NOT NULL,
  h_d_id TINYINT NOT NULL,
  h_w_id INT NOT NULL,
  h_date DATETIME NOT NULL,
  h_amount DECIMAL(6,2) NOT NULL,
  h_data VARCHAR(24) NOT NULL%s
)]],
   new_order = [[
CREATE TABLE new_order%d (
  no_o_id INT NOT NULL,
  no_d_id TINYINT NOT NULL,
  no_w_id INT NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)%s
)]],
   orders = [[
CREATE TABLE orders%d (
  o_id INT NOT NULL,
  o_d_id TINYINT NOT NULL,
  o_w_id INT NOT NULL,
  o_c_id INT NOT NULL,
  o_entry_d DATETIME NOT NULL,
  o_carrier_id TINYINT NULL,
  o_ol_cnt TINYINT NOT NULL,
  o_all_local TINYINT NOT NULL,
  PRIMARY KEY (o_w_id, o_d_id, o_id),
  KEY idx_orders_customer (o_w_id, o_d_id, o_c_id, o_id)%s
)]],
   order_line = [[
CREATE TABLE order_line%d (
  ol_o_id INT NOT NULL,
  ol_d_id TINYINT NOT NULL,
  ol_w_id INT NOT NULL,
  ol_number TINYINT NOT NULL,
  ol_i_id INT NOT NULL,
  ol_supply_w_id INT NOT NULL,
  ol_delivery_d DATETIME NULL,
  ol_quantity TINYINT NOT NULL,
  ol_amount DECIMAL(6,2) NOT NULL,
  ol_dist_info CHAR(24) NOT NULL,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)%s
)]],
   item = [[
CREATE TABLE item%d (
  i_id INT NOT NULL,
  i_im_id INT NOT NULL,
  i_name VARCHAR(24) NOT NULL,
  i_price DECIMAL(5,2) NOT NULL,
  i_data VARCHAR(50) NOT NULL,
  PRIMARY KEY (i_id)
)]],
   stock = [[
CREATE TABLE stock%d (
  s_i_id INT NOT NULL,
  s_w_id INT NOT NULL,
  s_quantity SMALLINT NOT NULL,
  s_dist_01 CHAR(24) NOT NULL,
  s_dist_02 CHAR(24) NOT NULL,
  s_dist_03 CHAR(24) NOT NULL,
  s_dist_04 CHAR(24) NOT NULL,
  s_dist_05 CHAR(24) NOT NULL,
  s_dist_06 CHAR(24) NOT NULL,
  s_dist_07 CHAR(24) NOT NULL,
  s_dist_08 CHAR(24) NOT NULL,
  s_dist_09 CHAR(24) NOT NULL,
  s_dist_10 CHAR(24) NOT NULL,
  s_ytd INT NOT NULL,
  s_order_cnt INT NOT NULL,
  s_remote_cnt INT NOT NULL,
  s_data VARCHAR(50) NOT NULL,
  PRIMARY KEY (s_w_id, s_i_id)%s
)]],
}

-- Foreign keys of clause 1.3 (InnoDB only; MyRocks has none). %d is the table set.
local FKS = {
   district = { "FOREIGN KEY (d_w_id) REFERENCES warehouse%d (w_id)" },
   customer = { "FOREIGN KEY (c_w_id, c_d_id) REFERENCES district%d (d_w_id, d_id)" },
   history = { "FOREIGN KEY (h_c_w_id, h_c_d_id, h_c_id) REFERENCES customer%d (c_w_id, c_d_id, c_id)",
               "FOREIGN KEY (h_w_id, h_d_id) REFERENCES district%d (d_w_id, d_id)" },
   new_order = { "FOREIGN KEY (no_w_id, no_d_id, no_o_id) REFERENCES orders%d (o_w_id, o_d_id, o_id)" },
   orders = { "FOREIGN KEY (o_w_id, o_d_id, o_c_id) REFERENCES customer%d (c_w_id, c_d_id, c_id)" },
   order_line = { "FOREIGN KEY (ol_w_id, ol_d_id, ol_o_id) REFERENCES orders%d (o_w_id, o_d_id, o_id)",
                  "FOREIGN KEY (ol_supply_w_id, ol_i_id) REFERENCES stock%d (s_w_id, s_i_id)" },
   stock = { "FOREIGN KEY (s_w_id) REFERENCES warehouse%d (w_id)",
             "FOREIGN KEY (s_i_id) REFERENCES item%d (i_id)" },
}

M.C_LOAD_COMMENT = "tpcc c_last_load="

--- CREATE TABLE statement of table `name` in set `set`; `c_load` goes into CUSTOMER's comment so
--- that a run can pick its C_LAST constant by the 2.1.6.1 rule.
function M.create_table_sql(name, set, engine, use_fk, c_load)
   local fk = ""
   if use_fk and FKS[name] then
      local parts = {}
      for _, f in ipairs(FKS[name]) do
         parts[#parts + 1] = ",\n  " .. f:format(set)
      end
      fk = table.concat(parts)
   end
   local sql = DDL[name]
   if sql:find("%%s") then
      sql = sql:format(set, fk)
   else
      sql = sql:format(set)
   end
   sql = sql .. " ENGINE = " .. engine
   if name == "customer" then
      sql = sql .. " COMMENT='" .. M.C_LOAD_COMMENT .. c_load .. "'"
   end
   return sql
end

--- table names of a set, children first (the order to drop them)
function M.drop_order(set)
   local names = { "order_line", "new_order", "orders", "history", "customer", "district", "stock",
                   "item", "warehouse" }
   local out = {}
   for i, n in ipairs(names) do out[i] = n .. set end
   return out
end

-- ---------------------------------------------------------------------------------------------
-- Time and shared counters (one C array shared by all of sysbench's Lua states in the process).

pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } tpcc_timespec_t;
int clock_gettime(int clk_id, tpcc_timespec_t *tp);
]])
local ts = ffi.new("tpcc_timespec_t")

function M.now()
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

pcall(ffi.cdef, [[
typedef struct {
  double committed[5];
  double rolled_back[5];
  double retried[5];
  double latency_s[5];
  double t_first;
  double t_last;
  double delivery_skipped;
  double pad[9];
} tpcc_stats_t;
void *calloc(size_t nmemb, size_t size);
int setenv(const char *name, const char *value, int overwrite);
]])

M.STATS_ENV = "DBMATRIX_TPCC_STATS"
M.CONST_ENV = "DBMATRIX_TPCC_CONSTANTS"

--- allocate one stats slot per thread (never freed: it lives as long as the process)
function M.stats_alloc(threads)
   local p = ffi.C.calloc(threads, ffi.sizeof("tpcc_stats_t"))
   assert(p ~= nil, "calloc failed")
   ffi.C.setenv(M.STATS_ENV, tostring(tonumber(ffi.cast("intptr_t", p))), 1)
   return ffi.cast("tpcc_stats_t *", p)
end

function M.stats_attach()
   local addr = os.getenv(M.STATS_ENV)
   if addr == nil then return nil end
   return ffi.cast("tpcc_stats_t *", ffi.cast("intptr_t", tonumber(addr)))
end

function M.setenv(name, value)
   ffi.C.setenv(name, value, 1)
end

return M
