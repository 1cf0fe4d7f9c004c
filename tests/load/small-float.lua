-- wrk script: POST /attend, 5 tokens x E=64 (4 heads, the demo set), float JSON, attention weights returned.
--   wrk -t2 -c8 -d10s -s tests/load/small-float.lua http://127.0.0.1:8080
-- The server must serve weight set "demo" (the default config does).
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "lib/attend.lua").use {
    name = "small-float", model = "demo", tokens = 5, embed = 64,
    encoding = "float", need_weights = true,
}
