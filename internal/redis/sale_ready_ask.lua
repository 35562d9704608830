-- sale_ready_ask.lua, after sale_ready.lua: whether Redis holds the sale
-- whole, for a node that found no entry or place of a buyer's and must
-- tell "not there" from "not put back yet" (Readiness.SaleReady).
-- KEYS[1] is the sale's stock hash. Returns 1 when ready, else 0.
if sale_ready(KEYS[1]) then
  return 1
end
return 0
