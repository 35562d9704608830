-- outcomes.lua: the outcome codes reserve.lua answers with, named in one
-- place. stock.go's scriptOutcomes maps the same numbers to the domain's
-- outcomes (TestScriptOutcomesMatchTheLuaHeader holds the two alike); a
-- number never changes meaning, so that a script and an engine of two
-- versions agree during an upgrade.
local RESERVED = 1
local SOLD_OUT = 3
local LIMIT_EXCEEDED = 4
local NOT_STARTED = 5 -- or not preheated
local ENDED = 6
local KEY_REUSED = 7 -- the idempotency key came back with another qty
local RATE_LIMITED = 8 -- {8, index of the refusing check, retry_after_us}
local HEALING = 9 -- the whole batch: the sale is being rebuilt, try later
local ADMISSION_REQUIRED = 10 -- the whole batch: not let in by the sale's admission

