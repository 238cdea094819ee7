-- TPC-C consistency conditions (clause 3.3.2.1-3.3.2.9) as SQL (dbmatrix).
--
-- Each condition is one query per table set returning (checked, violations): the number of
-- warehouses/districts/orders/lines examined and how many of them break the condition.

local lib = ...
local fmt = string.format

local C = {}

C.CONDITIONS = {
   { id = 1, what = "W_YTD = sum(D_YTD) per warehouse", sql = [[
SELECT COUNT(*), COALESCE(SUM(d.s IS NULL OR w.w_ytd <> d.s), 0)
FROM warehouse%d w
LEFT JOIN (SELECT d_w_id, SUM(d_ytd) AS s FROM district%d GROUP BY d_w_id) d ON d.d_w_id = w.w_id]] },

   -- "does not apply to the NEW-ORDER table for any districts which have no outstanding new orders"
   { id = 2, what = "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district", sql = [[
SELECT COUNT(*), COALESCE(SUM(o.m IS NULL OR d.d_next_o_id - 1 <> o.m OR (n.m IS NOT NULL AND n.m <> o.m)), 0)
FROM district%d d
LEFT JOIN (SELECT o_w_id, o_d_id, MAX(o_id) AS m FROM orders%d GROUP BY o_w_id, o_d_id) o
  ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id
LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) AS m FROM new_order%d GROUP BY no_w_id, no_d_id) n
  ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id]] },

   { id = 3, what = "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER) per district", sql = [[
SELECT COUNT(*), COALESCE(SUM(hi - lo + 1 <> n), 0)
FROM (SELECT MAX(no_o_id) AS hi, MIN(no_o_id) AS lo, COUNT(*) AS n FROM new_order%d
      GROUP BY no_w_id, no_d_id) x]] },

   { id = 4, what = "sum(O_OL_CNT) = count(ORDER_LINE) per district", sql = [[
SELECT COUNT(*), COALESCE(SUM(l.n IS NULL OR l.n <> o.s), 0)
FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS s FROM orders%d GROUP BY o_w_id, o_d_id) o
LEFT JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS n FROM order_line%d GROUP BY ol_w_id, ol_d_id) l
  ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id]] },

   { id = 5, what = "O_CARRIER_ID is null iff the order is in NEW_ORDER", sql = [[
SELECT COUNT(*), COALESCE(SUM((o.o_carrier_id IS NULL) <> (n.no_o_id IS NOT NULL)), 0)
FROM orders%d o
LEFT JOIN new_order%d n ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id AND n.no_o_id = o.o_id]] },

   { id = 6, what = "O_OL_CNT = count(ORDER_LINE) per order", sql = [[
SELECT COUNT(*), COALESCE(SUM(l.n IS NULL OR l.n <> o.o_ol_cnt), 0)
FROM orders%d o
LEFT JOIN (SELECT ol_w_id, ol_d_id, ol_o_id, COUNT(*) AS n FROM order_line%d
           GROUP BY ol_w_id, ol_d_id, ol_o_id) l
  ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id]] },

   { id = 7, what = "OL_DELIVERY_D is null iff O_CARRIER_ID is null", sql = [[
SELECT COUNT(*), COALESCE(SUM(o.o_id IS NULL OR (l.ol_delivery_d IS NULL) <> (o.o_carrier_id IS NULL)), 0)
FROM order_line%d l
LEFT JOIN orders%d o ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id AND o.o_id = l.ol_o_id]] },

   { id = 8, what = "W_YTD = sum(H_AMOUNT) per warehouse", sql = [[
SELECT COUNT(*), COALESCE(SUM(h.s IS NULL OR w.w_ytd <> h.s), 0)
FROM warehouse%d w
LEFT JOIN (SELECT h_w_id, SUM(h_amount) AS s FROM history%d GROUP BY h_w_id) h ON h.h_w_id = w.w_id]] },

   { id = 9, what = "D_YTD = sum(H_AMOUNT) per district", sql = [[
SELECT COUNT(*), COALESCE(SUM(h.s IS NULL OR d.d_ytd <> h.s), 0)
FROM district%d d
LEFT JOIN (SELECT h_w_id, h_d_id, SUM(h_amount) AS s FROM history%d GROUP BY h_w_id, h_d_id) h
  ON h.h_w_id = d.d_w_id AND h.h_d_id = d.d_id]] },
}

local BY_ID = {}
for _, c in ipairs(C.CONDITIONS) do BY_ID[c.id] = c end

--- condition ids from the --conditions option: a list of numbers or "all"
function C.parse_ids(list)
   local ids = {}
   for _, v in ipairs(list) do
      if v == "all" then
         for _, c in ipairs(C.CONDITIONS) do ids[#ids + 1] = c.id end
      else
         local n = tonumber(v)
         if n == nil or BY_ID[n] == nil then
            error(fmt("--conditions: %q is not a condition this script checks (1-%d or all)", v,
               #C.CONDITIONS))
         end
         ids[#ids + 1] = n
      end
   end
   table.sort(ids)
   return ids
end

local function sql_for(cond, set)
   local n = select(2, cond.sql:gsub("%%d", ""))
   local args = {}
   for i = 1, n do args[i] = set end
   return fmt(cond.sql, unpack(args))
end

--- Run the conditions `ids` over table sets 1..sets; print one line per condition; return ok.
function C.run(con, ids, sets, scale)
   io.stdout:write(fmt("TPC-C consistency check: table_sets=%d warehouses=%d conditions=%s\n", sets,
      scale, table.concat(ids, ",")))
   local all_ok = true
   for _, id in ipairs(ids) do
      local cond = BY_ID[id]
      local checked, bad = 0, 0
      for s = 1, sets do
         local n, v = con:query_row(sql_for(cond, s))
         checked = checked + tonumber(n)
         bad = bad + tonumber(v)
      end
      local ok = bad == 0
      all_ok = all_ok and ok
      io.stdout:write(fmt("    condition %d: %s checked=%d violations=%d (%s)\n", id, ok and "PASS" or "FAIL",
         checked, bad, cond.what))
   end
   io.stdout:write(fmt("TPC-C consistency: %s\n", all_ok and "PASS" or "FAIL"))
   io.stdout:flush()
   return all_ok
end

return C
