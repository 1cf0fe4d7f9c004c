-- wrk script: POST /v2/models/medium/infer, 128 tokens x E=256, binary tensors both ways, no attention weights.
--   wrk -t2 -c8 -d10s -s tests/load/medium-v2.lua http://127.0.0.1:8080
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "lib/attend.lua").use {
    name = "medium-v2", api = "v2", model = "medium", tokens = 128, embed = 256,
    need_weights = false,
}
