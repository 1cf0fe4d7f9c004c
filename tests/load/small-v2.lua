-- wrk script: POST /v2/models/demo/infer, 5 tokens x E=64, binary tensors both ways, with attention weights.
--   wrk -t2 -c8 -d10s -s tests/load/small-v2.lua http://127.0.0.1:8080
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "lib/attend.lua").use {
    name = "small-v2", api = "v2", model = "demo", tokens = 5, embed = 64,
    need_weights = true,
}
