-- TPC-C initial population (clause 4.3.3.1), loaded in parallel by sysbench threads (dbmatrix).
--
-- The work is cut into units (a quarter of ITEM, a quarter of a warehouse's STOCK, a warehouse
-- with its DISTRICT rows, one district's CUSTOMER/HISTORY/ORDERS/ORDER_LINE/NEW_ORDER rows) and
-- the units are spread over the threads by estimated cost, so even one warehouse loads in parallel.

local lib = ...
local uniform = sysbench.rand.uniform
local astring, nstring, decimal = lib.astring, lib.nstring, lib.decimal

local L = {}

local ROWS_PER_INSERT = 500
local PARTS = 4 -- ITEM and STOCK are loaded in this many slices each

--- Run one autocommit statement; retry it when sysbench calls the error ignorable (a deadlock or
--- lock wait timeout: --mysql-ignore-errors), which it signals by raising a table.
local function exec(con, sql)
   for attempt = 1, 5 do
      local ok, err = pcall(con.query, con, sql)
      if ok then return end
      if type(err) ~= "table" then error(err, 0) end
      if attempt == 5 then
         error(string.format("SQL error %s (%s) after 5 attempts", tostring(err.sql_errno),
            tostring(err.sql_errmsg)), 0)
      end
   end
end
L.exec = exec

--- Multi-row INSERT writer: flushes every ROWS_PER_INSERT rows (autocommit: one commit each).
local function writer(con, head)
   local rows, n = {}, 0
   local w = {}
   function w.add(row)
      n = n + 1
      rows[n] = row
      if n >= ROWS_PER_INSERT then w.flush() end
   end
   function w.flush()
      if n > 0 then
         exec(con, head .. table.concat(rows, ",", 1, n))
         rows, n = {}, 0
      end
   end
   return w
end

local function now_str()
   return os.date("%Y-%m-%d %H:%M:%S")
end

-- ---------------------------------------------------------------------------------------------
-- Units

--- All load units of `sets` table sets of `scale` warehouses, with a relative cost each.
function L.units(sets, scale)
   local u = {}
   for s = 1, sets do
      for part = 1, PARTS do
         u[#u + 1] = { kind = "item", set = s, part = part, cost = 2 }
      end
      for w = 1, scale do
         u[#u + 1] = { kind = "warehouse", set = s, w = w, cost = 0.1 }
         for part = 1, PARTS do
            u[#u + 1] = { kind = "stock", set = s, w = w, part = part, cost = 8 }
         end
         for d = 1, lib.DISTRICTS do
            u[#u + 1] = { kind = "district", set = s, w = w, d = d, cost = 5 }
         end
      end
   end
   return u
end

--- Longest-processing-time-first assignment of units to `threads`; returns thread -> list.
--- Deterministic, so every thread computes the same plan without talking to the others.
function L.assign(units, threads)
   local order = {}
   for i = 1, #units do order[i] = i end
   table.sort(order, function(a, b)
      if units[a].cost ~= units[b].cost then return units[a].cost > units[b].cost end
      return a < b
   end)
   local load, plan = {}, {}
   for t = 0, threads - 1 do load[t], plan[t] = 0, {} end
   for _, i in ipairs(order) do
      local best = 0
      for t = 1, threads - 1 do
         if load[t] < load[best] then best = t end
      end
      load[best] = load[best] + units[i].cost
      table.insert(plan[best], units[i])
   end
   return plan
end

-- ---------------------------------------------------------------------------------------------
-- Rows

local function slice(part)
   local per = lib.ITEMS / PARTS
   return (part - 1) * per + 1, part * per
end

local function load_items(con, set, part)
   local w = writer(con, ("INSERT INTO item%d (i_id, i_im_id, i_name, i_price, i_data) VALUES "):format(set))
   local lo, hi = slice(part)
   for i = lo, hi do
      w.add(("(%d,%d,'%s',%s,'%s')"):format(i, uniform(1, 10000), astring(14, 24),
         decimal(1, 100, 2), lib.data_string()))
   end
   w.flush()
end

local function address()
   return ("'%s','%s','%s','%s','%s'"):format(astring(10, 20), astring(10, 20), astring(10, 20),
      astring(2), lib.zip())
end

local function load_warehouse(con, set, wid)
   exec(con, ("INSERT INTO warehouse%d (w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, "
      .. "w_tax, w_ytd) VALUES (%d,'%s',%s,%s,300000.00)"):format(set, wid, astring(6, 10), address(),
      decimal(0, 0.2, 4)))
   local w = writer(con, ("INSERT INTO district%d (d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, "
      .. "d_state, d_zip, d_tax, d_ytd, d_next_o_id) VALUES "):format(set))
   for d = 1, lib.DISTRICTS do
      w.add(("(%d,%d,'%s',%s,%s,30000.00,%d)"):format(d, wid, astring(6, 10), address(),
         decimal(0, 0.2, 4), lib.ORDERS + 1))
   end
   w.flush()
end

local function load_stock(con, set, wid, part)
   local w = writer(con, ("INSERT INTO stock%d (s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, "
      .. "s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, "
      .. "s_ytd, s_order_cnt, s_remote_cnt, s_data) VALUES "):format(set))
   local lo, hi = slice(part)
   for i = lo, hi do
      w.add(("(%d,%d,%d,'%s','%s','%s','%s','%s','%s','%s','%s','%s','%s',0,0,0,'%s')"):format(
         i, wid, uniform(10, 100), astring(24), astring(24), astring(24), astring(24), astring(24),
         astring(24), astring(24), astring(24), astring(24), astring(24), lib.data_string()))
   end
   w.flush()
end

local function load_district(con, set, wid, did, c_load)
   local since = now_str()
   local cw = writer(con, ("INSERT INTO customer%d (c_id, c_d_id, c_w_id, c_first, c_middle, c_last, "
      .. "c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, "
      .. "c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data) VALUES "):format(set))
   local hw = writer(con, ("INSERT INTO history%d (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, "
      .. "h_amount, h_data) VALUES "):format(set))
   for c = 1, lib.CUSTOMERS do
      -- 4.3.3.1: the first 1,000 customers take the names 0..999 in order, the rest NURand(255,0,999).
      local last = c <= 1000 and lib.last_name(c - 1) or lib.last_name(lib.nurand(255, 0, 999, c_load))
      cw.add(("(%d,%d,%d,'%s','OE','%s',%s,'%s','%s','%s',50000.00,%s,-10.00,10.00,1,0,'%s')"):format(
         c, did, wid, astring(8, 16), last, address(), nstring(16), since,
         uniform(1, 10) == 1 and "BC" or "GC", decimal(0, 0.5, 4), astring(300, 500)))
      hw.add(("(%d,%d,%d,%d,%d,'%s',10.00,'%s')"):format(c, did, wid, did, wid, since, astring(12, 24)))
   end
   cw.flush()
   hw.flush()

   local ow = writer(con, ("INSERT INTO orders%d (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, "
      .. "o_ol_cnt, o_all_local) VALUES "):format(set))
   local lw = writer(con, ("INSERT INTO order_line%d (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, "
      .. "ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES "):format(set))
   local nw = writer(con, ("INSERT INTO new_order%d (no_o_id, no_d_id, no_w_id) VALUES "):format(set))
   local perm = lib.permutation(lib.CUSTOMERS)
   for o = 1, lib.ORDERS do
      local delivered = o < lib.FIRST_NEW_ORDER
      local ol_cnt = uniform(5, 15)
      ow.add(("(%d,%d,%d,%d,'%s',%s,%d,1)"):format(o, did, wid, perm[o], since,
         delivered and tostring(uniform(1, 10)) or "NULL", ol_cnt))
      for n = 1, ol_cnt do
         lw.add(("(%d,%d,%d,%d,%d,%d,%s,5,%s,'%s')"):format(o, did, wid, n, uniform(1, lib.ITEMS), wid,
            delivered and ("'" .. since .. "'") or "NULL",
            delivered and "0.00" or decimal(0.01, 9999.99, 2), astring(24)))
      end
      if not delivered then
         nw.add(("(%d,%d,%d)"):format(o, did, wid))
      end
   end
   ow.flush()
   lw.flush()
   nw.flush()
end

--- Load one unit through `con`; `c_load` maps set -> load-time C for C_LAST.
function L.load_unit(con, u, c_load)
   if u.kind == "item" then
      load_items(con, u.set, u.part)
   elseif u.kind == "warehouse" then
      load_warehouse(con, u.set, u.w)
   elseif u.kind == "stock" then
      load_stock(con, u.set, u.w, u.part)
   else
      load_district(con, u.set, u.w, u.d, c_load[u.set])
   end
end

return L
