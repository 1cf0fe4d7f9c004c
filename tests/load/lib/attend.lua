-- Shared part of the wrk scripts in tests/load/: builds one POST /attend
-- request body (self-attention on `tokens` x `embed` embeddings) once per wrk
-- thread at init, sends it for every request, and prints throughput and
-- latency percentiles when the run ends.
--
-- A script sets its case and returns:
--
--   local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
--   dofile(dir .. "lib/attend.lua").use {
--       model = "demo", tokens = 5, embed = 64,
--       encoding = "float",        -- or "base64": tensors in and out as base64
--       need_weights = true,
--   }
--
-- Environment, read by every script:
--   ATTN_LOAD_MODEL   override the weight-set name sent in "model"
--   ATTN_API_KEY      sent as "Authorization: Bearer ..." when set
--
-- Needs wrk built with LuaJIT (Debian's and upstream's are): float32 bytes for
-- the base64 encoding come from LuaJIT's ffi.

local M = {}

-- Deterministic inputs: the Park-Miller generator (exact in doubles: 16807 *
-- 2^31 < 2^53) mapped to multiples of 1/1000 in [-1, 1], so the JSON text is
-- short and the float32 the server reads is the same whichever encoding
-- carries it.
local function make_values(count, seed)
    local v, x = {}, seed
    for i = 1, count do
        x = (x * 16807) % 2147483647
        v[i] = ((x % 2001) - 1000) / 1000
    end
    return v
end

-- [[...E...], ...] as text: n rows of e numbers.
local function json_matrix(v, n, e)
    local rows, k = {}, 1
    for r = 1, n do
        local row = {}
        for c = 1, e do
            row[c] = string.format("%.3f", v[k])
            k = k + 1
        end
        rows[r] = "[" .. table.concat(row, ",") .. "]"
    end
    return "[" .. table.concat(rows, ",") .. "]"
end

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
    local bit = require("bit")
    local enc = {}
    for i = 1, 64 do enc[i - 1] = b64chars:sub(i, i) end
    local out, len = {}, #s
    for i = 1, len, 3 do
        local a, b, c = s:byte(i, i + 2)
        local n = bit.bor(bit.lshift(a, 16), bit.lshift(b or 0, 8), c or 0)
        out[#out + 1] = enc[bit.band(bit.rshift(n, 18), 63)] .. enc[bit.band(bit.rshift(n, 12), 63)]
            .. (b and enc[bit.band(bit.rshift(n, 6), 63)] or "=")
            .. (c and enc[bit.band(n, 63)] or "=")
    end
    return table.concat(out)
end

-- {"dtype":"float32","shape":[n,e],"base64":"..."}: little-endian float32.
local function base64_tensor(v, n, e)
    local ok, ffi = pcall(require, "ffi")
    if not ok then error("base64 bodies need wrk built with LuaJIT (ffi)") end
    if not ffi.abi("le") then error("base64 bodies are built for little-endian hosts") end
    local count = n * e
    local buf = ffi.new("float[?]", count)
    for i = 1, count do buf[i - 1] = v[i] end
    return string.format('{"dtype":"float32","shape":[%d,%d],"base64":"%s"}',
        n, e, base64(ffi.string(buf, count * 4)))
end

-- A v2 infer body with binary tensors both ways (c.api == "v2"): the JSON
-- header, then the little-endian float32 embeddings; returns body, header length.
local function v2_body(c, v)
    local ffi = require("ffi")
    local count = c.tokens * c.embed
    local buf = ffi.new("float[?]", count)
    for i = 1, count do buf[i - 1] = v[i] end
    local head = string.format('{"inputs":[{"name":"embeddings","shape":[%d,%d],"datatype":"FP32",'
        .. '"parameters":{"binary_data_size":%d}}],"parameters":{"binary_data_output":true}%s}',
        c.tokens, c.embed, count * 4,
        c.need_weights and "" or ',"outputs":[{"name":"output"}]')
    return head .. ffi.string(buf, count * 4), #head
end

-- The request body for case c (see the top of this file).
function M.body(c)
    local v = make_values(c.tokens * c.embed, c.seed or 12345)
    if c.api == "v2" then return v2_body(c, v) end
    local x
    if c.encoding == "base64" then
        x = base64_tensor(v, c.tokens, c.embed)
    else
        x = json_matrix(v, c.tokens, c.embed)
    end
    return string.format('{"model":"%s","embeddings":%s,"need_weights":%s,"encoding_format":"%s"}',
        os.getenv("ATTN_LOAD_MODEL") or c.model, x, tostring(c.need_weights), c.encoding)
end

-- Install wrk's hooks (init, request, done) for case c as globals.
function M.use(c)
    local req
    init = function(args)
        local headers = { ["Content-Type"] = "application/json" }
        local key = os.getenv("ATTN_API_KEY")
        if key and key ~= "" then headers["Authorization"] = "Bearer " .. key end
        -- Built once per wrk thread; every request then reuses the same bytes.
        if c.api == "v2" then
            local body, hlen = M.body(c)
            headers["Content-Type"] = "application/octet-stream"
            headers["Inference-Header-Content-Length"] = tostring(hlen)
            req = wrk.format("POST", "/v2/models/" .. (os.getenv("ATTN_LOAD_MODEL") or c.model)
                .. "/infer", headers, body)
        else
            req = wrk.format("POST", "/attend", headers, M.body(c))
        end
    end
    request = function() return req end
    done = function(summary, latency, requests)
        local secs = summary.duration / 1e6
        local e = summary.errors
        io.write(string.format(
            "%-14s %9.1f req/s   p50 %8.2f ms   p90 %8.2f ms   p99 %8.2f ms   (%d requests, %d non-2xx, %d socket errors)\n",
            c.name or (c.model .. "/" .. c.encoding), summary.requests / secs,
            latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
            summary.requests, e.status, e.connect + e.read + e.write + e.timeout))
    end
end

return M
