-- wrk script: POST /v2/models/large/infer, 512 tokens x E=768, binary tensors both ways, no attention weights.
--   wrk -t2 -c8 -d10s -s tests/load/large-v2.lua http://127.0.0.1:8080
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "lib/attend.lua").use {
    name = "large-v2", api = "v2", model = "large", tokens = 512, embed = 768,
    need_weights = false,
}
