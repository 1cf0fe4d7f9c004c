-- wrk script: POST /attend, 512 tokens x E=768 (12 heads), base64 tensors, no attention weights.
--   wrk -t2 -c8 -d10s -s tests/load/large-base64.lua http://127.0.0.1:8080
-- The server must serve weight set "large" (E=768): `make load-weights` writes
-- build/load/large.safetensors; `make load` starts a server with it.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "lib/attend.lua").use {
    name = "large-base64", model = "large", tokens = 512, embed = 768,
    encoding = "base64", need_weights = false,
}
