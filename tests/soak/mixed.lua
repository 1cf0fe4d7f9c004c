-- wrk script for the load, overload, soak and drain checks (tests/soak/*.sh):
-- POST /attend with a fixed mix of request sizes and encodings, counting
-- every response by status, by error_type, and whether 503s carry
-- Retry-After; done() prints one machine-readable RESULT line.
--
--   MIX='small-float:4,small-base64:4,medium-float:1,medium-base64:1' \
--     wrk -t2 -c64 -d60s --timeout 30s -s tests/soak/mixed.lua http://127.0.0.1:8080
--
-- Cases (request bodies from tests/load/lib/attend.lua, built once per wrk
-- thread): small = demo set, 5 x 64, weights returned; medium = 128 x 256
-- (set "medium"); large = 512 x 768 (set "large"); each -float or -base64.
-- MIX gives each case a weight; the requests cycle through a fixed sequence
-- in which each case appears weight times, spread evenly (smooth weighted
-- round robin), so the ratio is exact and the same on every run. Each wrk
-- thread starts at a different point of the sequence.
--
-- RESULT fields: requests, rps, p50_ms, p90_ms, p99_ms, max_ms, s2xx, s503,
-- s503_retry_after (503s with a Retry-After header), overloaded, not_ready,
-- drain_refused (503 not_ready whose message says the server is draining:
-- a new request refused during a drain), other (any status not 2xx/503),
-- connect, read, write, timeout (wrk's socket errors), duration_s, and
-- statuses=CODE:N/CODE:N.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local attend = dofile(dir .. "../load/lib/attend.lua")

local CASES = {
    ["small-float"]   = { model = "demo",   tokens = 5,   embed = 64,  encoding = "float",  need_weights = true },
    ["small-base64"]  = { model = "demo",   tokens = 5,   embed = 64,  encoding = "base64", need_weights = true },
    ["medium-float"]  = { model = "medium", tokens = 128, embed = 256, encoding = "float",  need_weights = false },
    ["medium-base64"] = { model = "medium", tokens = 128, embed = 256, encoding = "base64", need_weights = false },
    ["large-float"]   = { model = "large",  tokens = 512, embed = 768, encoding = "float",  need_weights = false },
    ["large-base64"]  = { model = "large",  tokens = 512, embed = 768, encoding = "base64", need_weights = false },
}

local MIX = os.getenv("MIX") or "small-float:4,small-base64:4,medium-float:1,medium-base64:1"

-- "a:4,b:1" -> { {name="a", weight=4}, {name="b", weight=1} }, checked.
local function parse_mix(s)
    local mix = {}
    for item in s:gmatch("[^,%s]+") do
        local name, w = item:match("^([%w-]+):(%d+)$")
        if not name then name, w = item, "1" end
        if not CASES[name] then error("MIX: unknown case '" .. name .. "'") end
        w = tonumber(w)
        if w > 0 then mix[#mix + 1] = { name = name, weight = w } end
    end
    if #mix == 0 then error("MIX: no case with a weight above 0") end
    return mix
end

-- Smooth weighted round robin: every step, add each weight to its running
-- score, pick the highest score, subtract the total from it.
local function sequence(mix)
    local total, score, seq = 0, {}, {}
    for i, m in ipairs(mix) do total = total + m.weight; score[i] = 0 end
    for _ = 1, total do
        local best = 1
        for i, m in ipairs(mix) do
            score[i] = score[i] + m.weight
            if score[i] > score[best] then best = i end
        end
        score[best] = score[best] - total
        seq[#seq + 1] = best
    end
    return seq
end

-- ------------------------------------------------------------- main state
local threads = {}
local next_id = 0

function setup(thread)
    thread:set("thread_id", next_id)
    next_id = next_id + 1
    threads[#threads + 1] = thread
end

-- ----------------------------------------------------------- thread state
local reqs, seq, pos
counts = { s2xx = 0, s503 = 0, s503_retry_after = 0, overloaded = 0, not_ready = 0,
           drain_refused = 0, other = 0 }
statuses = {}

function init(args)
    local mix = parse_mix(MIX)
    local headers = { ["Content-Type"] = "application/json" }
    local key = os.getenv("ATTN_API_KEY")
    if key and key ~= "" then headers["Authorization"] = "Bearer " .. key end
    reqs = {}
    for i, m in ipairs(mix) do
        local c = CASES[m.name]
        reqs[i] = wrk.format("POST", "/attend", headers, attend.body(c))
    end
    seq = sequence(mix)
    pos = ((thread_id or 0) * 7) % #seq
end

function request()
    pos = pos % #seq + 1
    return reqs[seq[pos]]
end

local function header(headers, name)
    local lname = name:lower()
    for k, v in pairs(headers) do
        if k:lower() == lname then return v end
    end
    return nil
end

function response(status, headers, body)
    local key = tostring(status)
    statuses[key] = (statuses[key] or 0) + 1
    if status >= 200 and status < 300 then
        counts.s2xx = counts.s2xx + 1
    elseif status == 503 then
        counts.s503 = counts.s503 + 1
        if header(headers, "Retry-After") then counts.s503_retry_after = counts.s503_retry_after + 1 end
        if body:find('"error_type":%s*"overloaded"') then
            counts.overloaded = counts.overloaded + 1
        elseif body:find('"error_type":%s*"not_ready"') then
            counts.not_ready = counts.not_ready + 1
            if body:find("draining", 1, true) then counts.drain_refused = counts.drain_refused + 1 end
        end
    else
        counts.other = counts.other + 1
    end
end

-- ------------------------------------------------------------------ done
function done(summary, latency, requests)
    local total, st = {}, {}
    for _, t in ipairs(threads) do
        for k, v in pairs(t:get("counts") or {}) do total[k] = (total[k] or 0) + v end
        for k, v in pairs(t:get("statuses") or {}) do st[k] = (st[k] or 0) + v end
    end
    local codes = {}
    for k in pairs(st) do codes[#codes + 1] = k end
    table.sort(codes)
    local parts = {}
    for _, k in ipairs(codes) do parts[#parts + 1] = k .. ":" .. st[k] end
    local secs = summary.duration / 1e6
    local e = summary.errors
    io.write(string.format(
        "RESULT requests=%d rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f " ..
        "s2xx=%d s503=%d s503_retry_after=%d overloaded=%d not_ready=%d drain_refused=%d other=%d " ..
        "connect=%d read=%d write=%d timeout=%d duration_s=%.2f statuses=%s mix=%s\n",
        summary.requests, summary.requests / secs,
        latency:percentile(50) / 1000, latency:percentile(90) / 1000,
        latency:percentile(99) / 1000, latency.max / 1000,
        total.s2xx or 0, total.s503 or 0, total.s503_retry_after or 0, total.overloaded or 0,
        total.not_ready or 0, total.drain_refused or 0, total.other or 0,
        e.connect, e.read, e.write, e.timeout, secs,
        #parts > 0 and table.concat(parts, "/") or "-", MIX))
end
