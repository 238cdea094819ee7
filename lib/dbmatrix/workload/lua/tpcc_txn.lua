-- The five TPC-C transactions (clause 2.4-2.8) for sysbench 1.0.20 (dbmatrix).
--
-- Each function takes a context {con, set, scale, C = {c_last, c_id, ol_i_id}, pick_w} and returns
-- "committed" or "rolled_back" (the 1 % New-Order business rollback). Deadlocks and lock-wait
-- timeouts raise sysbench's restart-event error; tpcc.lua rolls back and re-runs the same type.

local lib = ...
local uniform = sysbench.rand.uniform
local nurand = lib.nurand
local fmt = string.format

local T = {}

local function row(con, sql)
   local rs = con:query(sql)
   if rs == nil or rs.nrows == 0 then return nil end
   return rs:fetch_row()
end

--- customer id by last name: the row at position ceil(n/2) ordered by C_FIRST (2.5.2.2, 2.6.2.2)
local function customer_by_name(ctx, w, d)
   local last = lib.last_name(nurand(255, 0, 999, ctx.C.c_last))
   local rs = ctx.con:query(fmt("SELECT c_id FROM customer%d WHERE c_w_id=%d AND c_d_id=%d AND c_last='%s' "
      .. "ORDER BY c_first", ctx.set, w, d, last))
   local n = rs ~= nil and rs.nrows or 0
   if n == 0 then
      error(fmt("no customer named %s in warehouse %d district %d of set %d: is the database loaded by "
         .. "this script?", last, w, d, ctx.set))
   end
   local id
   for _ = 1, math.ceil(n / 2) do
      id = rs:fetch_row()[1]
   end
   return tonumber(id)
end

local function pick_customer(ctx, w, d)
   if uniform(1, 100) <= 60 then
      return customer_by_name(ctx, w, d)
   end
   return nurand(1023, 1, lib.CUSTOMERS, ctx.C.c_id)
end

-- ---------------------------------------------------------------------------------------------
-- 2.4 New-Order

function T.new_order(ctx)
   local con, s, scale = ctx.con, ctx.set, ctx.scale
   local w = ctx.pick_w()
   local d = uniform(1, lib.DISTRICTS)
   local c = nurand(1023, 1, lib.CUSTOMERS, ctx.C.c_id)
   local ol_cnt = uniform(5, 15)
   local rbk = uniform(1, 100)
   local items, all_local = {}, 1
   for i = 1, ol_cnt do
      local iid = nurand(8191, 1, lib.ITEMS, ctx.C.ol_i_id)
      if i == ol_cnt and rbk == 1 then iid = lib.UNUSED_ITEM end
      local sw = w
      if scale > 1 and uniform(1, 100) == 1 then
         sw = lib.other_warehouse(w, scale)
         all_local = 0
      end
      items[i] = { iid, sw, uniform(1, 10) }
   end

   con:query("BEGIN")
   local w_tax = row(con, fmt("SELECT w_tax FROM warehouse%d WHERE w_id=%d", s, w))[1]
   local dr = row(con, fmt("SELECT d_tax, d_next_o_id FROM district%d WHERE d_w_id=%d AND d_id=%d FOR UPDATE",
      s, w, d))
   local o_id = tonumber(dr[2])
   con:query(fmt("UPDATE district%d SET d_next_o_id=%d WHERE d_w_id=%d AND d_id=%d", s, o_id + 1, w, d))
   local cr = row(con, fmt("SELECT c_discount, c_last, c_credit FROM customer%d WHERE c_w_id=%d AND c_d_id=%d "
      .. "AND c_id=%d", s, w, d, c))
   con:query(fmt("INSERT INTO orders%d (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, "
      .. "o_all_local) VALUES (%d,%d,%d,%d,NOW(),NULL,%d,%d)", s, o_id, d, w, c, ol_cnt, all_local))
   con:query(fmt("INSERT INTO new_order%d (no_o_id, no_d_id, no_w_id) VALUES (%d,%d,%d)", s, o_id, d, w))

   local lines, total = {}, 0
   for n, it in ipairs(items) do
      local iid, sw, qty = it[1], it[2], it[3]
      local ir = row(con, fmt("SELECT i_price, i_name, i_data FROM item%d WHERE i_id=%d", s, iid))
      if ir == nil then
         -- 2.4.2.3: an unused item number: the whole transaction is rolled back.
         con:query("ROLLBACK")
         return "rolled_back"
      end
      local sr = row(con, fmt("SELECT s_quantity, s_data, s_dist_%02d FROM stock%d WHERE s_w_id=%d AND "
         .. "s_i_id=%d FOR UPDATE", d, s, sw, iid))
      local sq = tonumber(sr[1])
      sq = (sq - qty >= 10) and (sq - qty) or (sq - qty + 91)
      con:query(fmt("UPDATE stock%d SET s_quantity=%d, s_ytd=s_ytd+%d, s_order_cnt=s_order_cnt+1, "
         .. "s_remote_cnt=s_remote_cnt+%d WHERE s_w_id=%d AND s_i_id=%d", s, sq, qty,
         sw == w and 0 or 1, sw, iid))
      local amount = qty * tonumber(ir[1])
      total = total + amount
      -- brand/generic (2.4.2.2) is part of the terminal's output only
      local _ = (ir[3]:find("ORIGINAL", 1, true) and sr[2]:find("ORIGINAL", 1, true)) and "B" or "G"
      lines[n] = fmt("(%d,%d,%d,%d,%d,%d,NULL,%d,%.2f,'%s')", o_id, d, w, n, iid, sw, qty, amount, sr[3])
   end
   con:query(fmt("INSERT INTO order_line%d (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, "
      .. "ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES ", s) .. table.concat(lines, ","))
   con:query("COMMIT")
   local _ = total * (1 - tonumber(cr[1])) * (1 + tonumber(w_tax) + tonumber(dr[1]))
   return "committed"
end

-- ---------------------------------------------------------------------------------------------
-- 2.5 Payment

function T.payment(ctx)
   local con, s, scale = ctx.con, ctx.set, ctx.scale
   local w = ctx.pick_w()
   local d = uniform(1, lib.DISTRICTS)
   local c_w, c_d = w, d
   if scale > 1 and uniform(1, 100) > 85 then
      c_w = lib.other_warehouse(w, scale)
      c_d = uniform(1, lib.DISTRICTS)
   end
   local amount = uniform(100, 500000) / 100

   con:query("BEGIN")
   con:query(fmt("UPDATE warehouse%d SET w_ytd=w_ytd+%.2f WHERE w_id=%d", s, amount, w))
   local wr = row(con, fmt("SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse%d "
      .. "WHERE w_id=%d", s, w))
   con:query(fmt("UPDATE district%d SET d_ytd=d_ytd+%.2f WHERE d_w_id=%d AND d_id=%d", s, amount, w, d))
   local dr = row(con, fmt("SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district%d "
      .. "WHERE d_w_id=%d AND d_id=%d", s, w, d))
   local c = pick_customer(ctx, c_w, c_d)
   local cr = row(con, fmt("SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, "
      .. "c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_data FROM customer%d "
      .. "WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d FOR UPDATE", s, c_w, c_d, c))
   if cr[11] == "BC" then
      local data = (fmt("%d %d %d %d %d %.2f|", c, c_d, c_w, d, w, amount) .. cr[15]):sub(1, 500)
      con:query(fmt("UPDATE customer%d SET c_balance=c_balance-%.2f, c_ytd_payment=c_ytd_payment+%.2f, "
         .. "c_payment_cnt=c_payment_cnt+1, c_data=%s WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d",
         s, amount, amount, lib.sql_str(data), c_w, c_d, c))
   else
      con:query(fmt("UPDATE customer%d SET c_balance=c_balance-%.2f, c_ytd_payment=c_ytd_payment+%.2f, "
         .. "c_payment_cnt=c_payment_cnt+1 WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d",
         s, amount, amount, c_w, c_d, c))
   end
   con:query(fmt("INSERT INTO history%d (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) "
      .. "VALUES (%d,%d,%d,%d,%d,NOW(),%.2f,%s)", s, c, c_d, c_w, d, w, amount,
      lib.sql_str(wr[1] .. "    " .. dr[1])))
   con:query("COMMIT")
   return "committed"
end

-- ---------------------------------------------------------------------------------------------
-- 2.6 Order-Status (read-only)

function T.order_status(ctx)
   local con, s = ctx.con, ctx.set
   local w = ctx.pick_w()
   local d = uniform(1, lib.DISTRICTS)
   con:query("BEGIN")
   local c = pick_customer(ctx, w, d)
   row(con, fmt("SELECT c_balance, c_first, c_middle, c_last FROM customer%d WHERE c_w_id=%d AND c_d_id=%d "
      .. "AND c_id=%d", s, w, d, c))
   local o = row(con, fmt("SELECT o_id, o_entry_d, o_carrier_id FROM orders%d WHERE o_w_id=%d AND o_d_id=%d "
      .. "AND o_c_id=%d ORDER BY o_id DESC LIMIT 1", s, w, d, c))
   if o ~= nil then
      con:query(fmt("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line%d "
         .. "WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%s", s, w, d, o[1]))
   end
   con:query("COMMIT")
   return "committed"
end

-- ---------------------------------------------------------------------------------------------
-- 2.7 Delivery: all 10 districts in one database transaction; returns the districts skipped.

function T.delivery(ctx)
   local con, s = ctx.con, ctx.set
   local w = ctx.pick_w()
   local carrier = uniform(1, 10)
   local skipped = 0
   con:query("BEGIN")
   for d = 1, lib.DISTRICTS do
      local no = row(con, fmt("SELECT no_o_id FROM new_order%d WHERE no_w_id=%d AND no_d_id=%d "
         .. "ORDER BY no_o_id LIMIT 1 FOR UPDATE", s, w, d))
      local delivered = false
      if no ~= nil then
         local o = no[1]
         con:query(fmt("DELETE FROM new_order%d WHERE no_w_id=%d AND no_d_id=%d AND no_o_id=%s", s, w, d, o))
         -- another Delivery may have taken this order while we waited for its lock
         if tonumber(row(con, "SELECT ROW_COUNT()")[1]) == 1 then
            local c = row(con, fmt("SELECT o_c_id FROM orders%d WHERE o_w_id=%d AND o_d_id=%d AND o_id=%s",
               s, w, d, o))[1]
            con:query(fmt("UPDATE orders%d SET o_carrier_id=%d WHERE o_w_id=%d AND o_d_id=%d AND o_id=%s",
               s, carrier, w, d, o))
            con:query(fmt("UPDATE order_line%d SET ol_delivery_d=NOW() WHERE ol_w_id=%d AND ol_d_id=%d "
               .. "AND ol_o_id=%s", s, w, d, o))
            local total = row(con, fmt("SELECT SUM(ol_amount) FROM order_line%d WHERE ol_w_id=%d AND "
               .. "ol_d_id=%d AND ol_o_id=%s", s, w, d, o))[1]
            con:query(fmt("UPDATE customer%d SET c_balance=c_balance+%s, c_delivery_cnt=c_delivery_cnt+1 "
               .. "WHERE c_w_id=%d AND c_d_id=%d AND c_id=%s", s, total, w, d, c))
            delivered = true
         end
      end
      if not delivered then skipped = skipped + 1 end
   end
   con:query("COMMIT")
   return "committed", skipped
end

-- ---------------------------------------------------------------------------------------------
-- 2.8 Stock-Level (read-only)

function T.stock_level(ctx)
   local con, s = ctx.con, ctx.set
   local w = ctx.pick_w()
   local d = uniform(1, lib.DISTRICTS)
   local threshold = uniform(10, 20)
   con:query("BEGIN")
   local next_o = tonumber(row(con, fmt("SELECT d_next_o_id FROM district%d WHERE d_w_id=%d AND d_id=%d",
      s, w, d))[1])
   row(con, fmt("SELECT COUNT(DISTINCT s_i_id) FROM order_line%d JOIN stock%d ON s_w_id=%d AND s_i_id=ol_i_id "
      .. "WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id>=%d AND ol_o_id<%d AND s_quantity<%d",
      s, s, w, w, d, next_o - 20, next_o, threshold))
   con:query("COMMIT")
   return "committed"
end

T.BY_INDEX = { T.new_order, T.payment, T.order_status, T.delivery, T.stock_level }

return T
