-- wrk script: POST /attend, 128 tokens x E=256 (8 heads), float JSON, no attention weights.
--   wrk -t2 -c8 -d10s -s tests/load/medium-float.lua http://127.0.0.1:8080
-- The server must serve weight set "medium" (E=256): `make load-weights` writes
-- build/load/medium.safetensors; `make load` starts a server with it.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "lib/attend.lua").use {
    name = "medium-float", model = "medium", tokens = 128, embed = 256,
    encoding = "float", need_weights = false,
}
