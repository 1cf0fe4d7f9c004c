#!/usr/bin/env bash
# HTTP benchmark (`make bench-http`): wrk against the daemon for small,
# medium and large requests in /attend float JSON and base64 and in v2 with
# binary tensors, beside a minimal libmicrohttpd server answering a fixed
# JSON body of the small answer's size, all in one run on this machine. Per
# case it reports req/s, p50/p99 latency, and the mean decode, compute and
# encode time per request (from the daemon's /metrics before and after the
# case). Then one large request at a time (tests/bench/wall_ratio.py: n=512,
# E=768, 12 heads, with per-head weights), the client's wall time against
# the server's compute time four ways, each beside the time the minimal
# server takes to take the same request body and give an answer of the same
# size (the transfer alone, in the same rounds), and the same v2 request
# without attention weights as an end-to-end rate against the FMA peak of
# the CPU measured before and after it (tests/bench/fma_peak.h). Then the
# targets:
#   small float req/s >= 50% of the minimal server's (measured before and after, mean),
#   beside the minimal server made to burn the CPU time our small request
#   spends in decode + compute + encode (the rate that work alone leaves);
#   wall / compute: v2 binary <= 1.15, /attend base64 <= 1.5, float <= 3;
#   the float request with Accept-Encoding: gzip / without <= 1.3;
#   v2 binary without weights, end to end, one request at a time on a
#   kept-alive connection (Python's http.client, as inference clients keep
#   theirs; curl's figure, a new connection a request, beside it): >= 70%
#   of the FMA peak;
#   medium requests with batching across requests / without >= 1.3 req/s
#   (a second daemon with --batch-max-requests 16, rounds alternated),
#   beside where a medium request's CPU time goes (the compute pool's
#   threads, the server's other threads and the rest of the machine, from
#   /proc) and the rate 1.3x would ask of the pool's threads;
#   v2 without weights also gets the bound of a server that takes the
#   request, computes and answers in turn (its transfer floor), and its
#   rate from CONNECTIONS at once (the large-v2 row: transfers overlap
#   other requests' compute).
#
# Environment: DURATION (10s), CONNECTIONS (64), THREADS (2: wrk threads).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${ATTN_SERVER_BIN:-$root/bin/attention-server}
MIN=${ATTN_MINIMAL_BIN:-$root/build/release/bench/bench_minimal_mhd}
PEAK=${ATTN_FMA_PEAK_BIN:-$root/build/release/bench/bench_fma_peak}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
LOAD_DIR=$root/build/load
PY=/usr/bin/python3
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
[ -s "$LOAD_DIR/medium.safetensors" ] && [ -s "$LOAD_DIR/large.safetensors" ] || "$PY" "$root/tests/load/make-weights.py" "$LOAD_DIR" || exit 1

port=$(free_port)
"$BIN" --host 127.0.0.1 --port "$port" --model "demo=$root/config/weights/demo.safetensors" \
    --model "medium=$LOAD_DIR/medium.safetensors" --model "large=$LOAD_DIR/large.safetensors" \
    2>"$LOAD_DIR/bench-http-server.log" &
pids+=($!)
# the same with batching across requests (off by default), for the comparison
port2=$(free_port)
"$BIN" --host 127.0.0.1 --port "$port2" --batch-max-requests 16 \
    --model "medium=$LOAD_DIR/medium.safetensors" 2>"$LOAD_DIR/bench-http-server-nobatch.log" &
pids+=($!)
URL2=http://127.0.0.1:$port2
mport=$(free_port)
"$MIN" "$mport" 2>/dev/null &
pids+=($!)
URL=http://127.0.0.1:$port
for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && break; sleep 0.1
done
# the minimal server answers with the size of our small answer
small_bytes=$(curl -s -o /dev/null -w '%{size_download}' -H 'Content-Type: application/json' \
    -d "{\"model\":\"demo\",\"embeddings\":$("$PY" -c 'print([[0.001*((i*64+j)%2001-1000) for j in range(64)] for i in range(5)])')}" "$URL/attend")
[ "${small_bytes:-0}" -gt 1000 ] || { echo "the small request failed (answer of ${small_bytes:-0} bytes)" >&2; exit 1; }
kill -TERM "${pids[2]}"; wait "${pids[2]}" 2>/dev/null
"$MIN" "$mport" "$small_bytes" 2>/dev/null &
pids[2]=$!
sleep 0.3

# sum and count of a histogram in /metrics
metric() { curl -s "$URL/metrics" | awk -v n="$1" '$1 == n"_sum" {s=$2} $1 == n"_count" {c=$2} END {print s, c}'; }
snapshot() { echo "$(metric attention_server_decode_seconds) $(metric attention_server_compute_seconds) $(metric attention_server_encode_seconds)"; }

run_wrk() { # url script -> "req/s p50 p99 non2xx"
    local out; out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 60s --latency -s "$2" "$1" 2>&1)
    local rps p50 p99 bad
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    bad=$(awk '/Non-2xx/ {print $NF}' <<<"$out"); bad=${bad:-0}
    echo "${rps:-0} ${p50:-?} ${p99:-?} $bad"
}

echo "attention-server $("$BIN" --version | awk '{print $2}'), wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
read -r m1 m1p50 m1p99 _ <<<"$(run_wrk "http://127.0.0.1:$mport" "$here/../load/small-float.lua")"
printf '\n| case | req/s | p50 | p99 | non-2xx | decode ms | compute ms | encode ms | (decode+encode)/compute |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
declare -A RPS RATIO
work_us=0 # the small float request's decode + compute + encode, µs
for size in small medium large; do
  for enc in float base64 v2; do
    s="$here/../load/$size-$enc.lua"
    read -r d0s d0c c0s c0c e0s e0c <<<"$(snapshot)"
    read -r rps p50 p99 bad <<<"$(run_wrk "$URL" "$s")"
    read -r d1s d1c c1s c1c e1s e1c <<<"$(snapshot)"
    line=$(awk -v a="$d0s $d0c $c0s $c0c $e0s $e0c" -v b="$d1s $d1c $c1s $c1c $e1s $e1c" 'BEGIN {
        split(a, x); split(b, y); n = y[2] - x[2]; if (n < 1) n = 1
        dec = (y[1] - x[1]) / n * 1e3; cmp = (y[3] - x[3]) / (y[4] - x[4] > 0 ? y[4] - x[4] : 1) * 1e3
        enc = (y[5] - x[5]) / (y[6] - x[6] > 0 ? y[6] - x[6] : 1) * 1e3
        printf "%.3f %.3f %.3f %.2f", dec, cmp, enc, (cmp > 0 ? (dec + enc) / cmp : 0) }')
    read -r dec cmp encd ratio <<<"$line"
    printf '| %s-%s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$size" "$enc" "$rps" "$p50" "$p99" "$bad" "$dec" "$cmp" "$encd" "$ratio"
    RPS[$size-$enc]=$rps; RATIO[$size-$enc]=$ratio
    [ "$size-$enc" = small-float ] && work_us=$(awk -v a="$dec" -v b="$cmp" -v c="$encd" 'BEGIN {printf "%.1f", (a + b + c) * 1e3}')
  done
done
read -r m2 m2p50 m2p99 _ <<<"$(run_wrk "http://127.0.0.1:$mport" "$here/../load/small-float.lua")"
printf '| minimal libmicrohttpd server, fixed %s-byte JSON (before / after) | %s / %s | %s / %s | %s / %s | | | | | |\n' \
    "$small_bytes" "$m1" "$m2" "$m1p50" "$m2p50" "$m1p99" "$m2p99"
# The same minimal server charged with the CPU time our small float request
# spends in decode + compute + encode (burnt on its I/O thread, as ours runs
# a tiny request there): the rate that work alone leaves, with an HTTP layer
# that costs nothing more than the minimal server's.
wport=$(free_port)
"$MIN" "$wport" "$small_bytes" 2 "$work_us" 2>/dev/null &
wpid=$!
pids+=("$wpid")
sleep 0.3
read -r mw mwp50 mwp99 _ <<<"$(run_wrk "http://127.0.0.1:$wport" "$here/../load/small-float.lua")"
kill -TERM "$wpid"; wait "$wpid" 2>/dev/null
printf '| the same minimal server burning %s µs of CPU a request (our small float decode + compute + encode) | %s | %s | %s | | | | | |\n' \
    "$work_us" "$mw" "$mwp50" "$mwp99"

# Batching across requests: the medium cases on a server that batches
# (--batch-max-requests 16) against the defaults (no batching), alternated
# twice.
echo
echo "Batching across requests, medium (128 x 256, 8 heads, no weights), $CONNECTIONS connections; on: --batch-max-requests 16, off: the defaults; rounds alternated (on, off, on, off):"
printf '\n| case | on req/s | off req/s | on/off | on p99 | off p99 | requests per pass (on) |\n|---|---:|---:|---:|---:|---:|---:|\n'
# CPU ticks (utime + stime) of PID's threads named attn-pool (the compute
# pool), of its other threads, and of the whole machine (/proc/stat: all
# but idle and iowait; wrk, the kernel's loopback and the rest)
cpu_split() {
    local pool=0 other=0 t c v
    for t in /proc/"$1"/task/*; do
        c=$(cat "$t/comm" 2>/dev/null) || continue
        v=$(awk '{sub(/.*\) /, ""); print $12 + $13}' "$t/stat" 2>/dev/null) || continue
        if [ "$c" = attn-pool ]; then pool=$((pool + v)); else other=$((other + v)); fi
    done
    echo "$pool $other $(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat)"
}
# run_wrk with the CPU the run took: "req/s p50 p99 non2xx pool other machine" (ticks)
run_wrk_cpu() { # pid url script
    local c0 c1 r
    c0=$(cpu_split "$1"); r=$(run_wrk "$2" "$3"); c1=$(cpu_split "$1")
    echo "$r $(awk -v a="$c0" -v b="$c1" 'BEGIN {split(a, x); split(b, y); print y[1] - x[1], y[2] - x[2], y[3] - x[3]}')"
}
tick_ms=$(awk -v t="$(getconf CLK_TCK)" 'BEGIN {print 1000 / t}')
secs=${DURATION%s}
# CPU ms per request over two runs: "pool other rest" from req/s of each
# run and the runs' summed ticks (pool, server's other threads, machine)
per_request() { # rps1 rps2 pool other machine
    awk -v t="$tick_ms" -v n="$(awk -v a="$1" -v b="$2" -v d="$secs" 'BEGIN {print (a + b) * d}')" \
        -v p="$3" -v o="$4" -v m="$5" \
        'BEGIN {n = n > 0 ? n : 1; printf "%.3f %.3f %.3f", p * t / n, o * t / n, (m - p - o) * t / n}'
}
declare -A BON BOFF BP99ON BP99OFF CPUON CPUOFF
for enc in float v2; do
    s="$here/../load/medium-$enc.lua"
    read -r b0s b0c <<<"$(URL=$URL2 metric attention_server_batch_requests)"
    read -r a1 a1p50 a1p99 _ ap1 ao1 am1 <<<"$(run_wrk_cpu "${pids[1]}" "$URL2" "$s")"
    read -r o1 o1p50 o1p99 _ op1 oo1 om1 <<<"$(run_wrk_cpu "${pids[0]}" "$URL" "$s")"
    read -r a2 a2p50 a2p99 _ ap2 ao2 am2 <<<"$(run_wrk_cpu "${pids[1]}" "$URL2" "$s")"
    read -r o2 o2p50 o2p99 _ op2 oo2 om2 <<<"$(run_wrk_cpu "${pids[0]}" "$URL" "$s")"
    read -r b1s b1c <<<"$(URL=$URL2 metric attention_server_batch_requests)"
    # CPU ms per request: the pool, the server's other threads, the rest of the machine
    CPUON[$enc]=$(per_request "$a1" "$a2" "$((ap1 + ap2))" "$((ao1 + ao2))" "$((am1 + am2))")
    CPUOFF[$enc]=$(per_request "$o1" "$o2" "$((op1 + op2))" "$((oo1 + oo2))" "$((om1 + om2))")
    on=$(awk -v a="$a1" -v b="$a2" 'BEGIN {print (a + b) / 2}')
    off=$(awk -v a="$o1" -v b="$o2" 'BEGIN {print (a + b) / 2}')
    ratio=$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    per=$(awk -v s0="$b0s" -v c0="$b0c" -v s1="$b1s" -v c1="$b1c" 'BEGIN {printf "%.2f", (c1 - c0 > 0 ? (s1 - s0) / (c1 - c0) : 0)}')
    printf '| medium-%s | %s | %s | %s | %s / %s | %s / %s | %s |\n' "$enc" "$on" "$off" "$ratio" "$a1p99" "$a2p99" "$o1p99" "$o2p99" "$per"
    BON[$enc]=$on; BOFF[$enc]=$off; BP99ON[$enc]="$a1p99 $a2p99"; BP99OFF[$enc]="$o1p99 $o2p99"
done
# Where a request's CPU time goes, from the threads' and the machine's
# counters over the same runs: batching can only shorten the pool's part.
echo
echo "CPU time per request in the same runs (ms; the machine's 2 cores are busy throughout, so req/s is about 2000 / total): the compute pool's threads (attn-pool), the server's other threads (libmicrohttpd's, decoding and encoding), and the rest of the machine (wrk, the kernel's loopback). Batching can only shorten the pool's part: with the rest unchanged, a pool part of zero would give total / rest."
printf '\n| case | pool | server, other threads | rest of the machine | total | bound with no pool time at all |\n|---|---:|---:|---:|---:|---:|\n'
for enc in float v2; do
    for side in on off; do
        if [ "$side" = on ]; then v=${CPUON[$enc]}; else v=${CPUOFF[$enc]}; fi
        read -r cp co cm <<<"$v"
        line=$(awk -v p="$cp" -v o="$co" -v m="$cm" 'BEGIN {t = p + o + m; printf "%.3f %.2f", t, (o + m > 0 ? t / (o + m) : 0)}')
        read -r tot bnd <<<"$line"
        printf '| medium-%s, batching %s | %s | %s | %s | %s | %sx |\n' "$enc" "$side" "$cp" "$co" "$cm" "$tot" "$bnd"
    done
done


# One large request at a time: client wall time against server compute.
echo
echo "One request at a time, n=512 E=768 H=12 with per-head weights (curl as the client):"
read -r _ peak1 isa cpu < <("$PEAK")
ratios=$("$PY" "$here/wall_ratio.py" "$URL" large 7 "http://127.0.0.1:$mport" "${pids[2]}") || { echo "$ratios"; exit 1; }
read -r _ peak2 _ < <("$PEAK")
grep -Ev '^(RATIO|FLOOR|BOUND|OVERLAP|RATE) ' <<<"$ratios"
read -r _ _ rate_e2e rate_compute < <(grep '^RATE v2-noweights' <<<"$ratios")
read -r _ _ rate_ka rate_ka_compute < <(grep '^RATE v2-keepalive' <<<"$ratios")
peak=$(awk -v a="$peak1" -v b="$peak2" 'BEGIN {print (a > b ? a : b)}')
pct_e2e=$(awk -v r="$rate_e2e" -v p="$peak" 'BEGIN {printf "%.0f", 100 * r / p}')
pct_compute=$(awk -v r="$rate_compute" -v p="$peak" 'BEGIN {printf "%.0f", 100 * r / p}')
pct_ka=$(awk -v r="$rate_ka" -v p="$peak" 'BEGIN {printf "%.0f", 100 * r / p}')
pct_ka_compute=$(awk -v r="$rate_ka_compute" -v p="$peak" 'BEGIN {printf "%.0f", 100 * r / p}')
echo
echo "v2 binary without weights (n=512, E=768, 12 heads): on a kept-alive connection $rate_ka GFLOPS end to end, $rate_ka_compute GFLOPS in compute; with curl (a new connection a request) $rate_e2e GFLOPS end to end, $rate_compute GFLOPS in compute; FMA peak of $cpu ($isa, the pool's threads) $peak1 before, $peak2 after"
declare -A WR FL BD OV
while read -r _ k v; do WR[$k]=$v; done < <(grep '^RATIO' <<<"$ratios")
while read -r _ k v; do FL[$k]=$v; done < <(grep '^FLOOR' <<<"$ratios")
while read -r _ k v; do BD[$k]=$v; done < <(grep '^BOUND' <<<"$ratios")
while read -r _ k v; do OV[$k]=$v; done < <(grep '^OVERLAP' <<<"$ratios")

pass=0 fail=0
check() { if awk "BEGIN {exit !($2)}"; then echo "PASS $1"; pass=$((pass+1)); else echo "FAIL $1"; fail=$((fail+1)); fi; }
mmean=$(awk -v a="$m1" -v b="$m2" 'BEGIN {print (a + b) / 2}')
share=$(awk -v a="${RPS[small-float]}" -v m="$mmean" 'BEGIN {printf "%.0f", (m > 0 ? 100 * a / m : 0)}')
echo
wshare=$(awk -v a="$mw" -v m="$mmean" 'BEGIN {printf "%.0f", (m > 0 ? 100 * a / m : 0)}')
check "small float: ${RPS[small-float]} req/s = ${share}% of the minimal server's ${mmean} (target >= 50%; the minimal server burning our ${work_us} µs of decode + compute + encode: ${wshare}%)" "$share >= 50"
floor_note() { echo "the transfer alone took ${FL[$1]} ms: compute + transfer = ${BD[$1]} x compute"; }
check "v2 binary, n=512 with weights: wall / compute = ${WR[v2-binary]} (target <= 1.15; $(floor_note v2-binary))" "${WR[v2-binary]} <= 1.15"
check "/attend base64, same request: wall / compute = ${WR[attend-base64]} (target <= 1.5; $(floor_note attend-base64))" "${WR[attend-base64]} <= 1.5"
check "/attend float JSON, same request: wall / compute = ${WR[attend-float]} (target <= 3; $(floor_note attend-float))" "${WR[attend-float]} <= 3"
check "the float request with Accept-Encoding: gzip / without = ${WR[gzip-over-plain]} (target <= 1.3)" "${WR[gzip-over-plain]} <= 1.3"
# what a server that takes the body, computes and answers in turn (the
# three not overlapped) could reach at most: compute's rate over the bound
pct_serial=$(awk -v c="$pct_compute" -v b="${BD[v2-noweights]:-0}" 'BEGIN {printf "%.0f", (b > 0 ? c / b : 0)}')
# the same request from CONNECTIONS at once (the large-v2 row above):
# transfers overlap other requests' compute, as behind a load balancer;
# 3.22 GFLOP a request (wall_ratio.py's flops)
pct_conc=$(awk -v r="${RPS[large-v2]:-0}" -v p="$peak" 'BEGIN {printf "%.0f", 100 * r * 3221225472 / 1e9 / p}')
pct_ka_serial=$(awk -v c="$pct_ka_compute" -v b="${BD[v2-keepalive]:-0}" 'BEGIN {printf "%.0f", (b > 0 ? c / b : 0)}')
# and what one that overlapped the transfer with compute perfectly could:
# the transfer's CPU time still comes out of the pool's cores
pct_ka_overlap=$(awk -v c="$pct_ka_compute" -v b="${OV[v2-keepalive]:-0}" 'BEGIN {printf "%.0f", (b > 0 ? c / b : 0)}')
# The target's figure is one request at a time on a kept-alive connection,
# the way inference clients call; curl's (a new connection and a new
# process a request) and the concurrent figure are printed beside it.
check "v2 binary without weights, one request at a time on a kept-alive connection: ${pct_ka}% of the FMA peak end to end (target >= 70%; compute alone ${pct_ka_compute}%; $(floor_note v2-keepalive), so taking, computing and answering in turn reaches at most ${pct_ka_serial}%, and overlapping the transfer with compute perfectly at most ${pct_ka_overlap}%: the transfer's CPU time is the pool's cores' too); with curl, a new connection a request: ${pct_e2e}% (compute ${pct_compute}%; $(floor_note v2-noweights): at most ${pct_serial}%); from $CONNECTIONS connections at once, ${RPS[large-v2]} req/s: ${pct_conc}%" "$pct_ka >= 70"
# The pool time a request could take for 1.3x with the rest of its CPU time
# as without batching, and the rate that asks of the pool's threads: a
# medium request is 8nE^2 + 4n^2E = 83.9 MFLOP (n = 128, E = 256).
medium_flops=83886080
for enc in float v2; do
    r=$(awk -v a="${BON[$enc]}" -v b="${BOFF[$enc]}" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    read -r cp co cm <<<"${CPUOFF[$enc]}"
    need=$(awk -v p="$cp" -v o="$co" -v m="$cm" -v f="$medium_flops" -v pk="$peak" -v nt="$(nproc)" 'BEGIN {
        q = (p + o + m) / 1.3 - o - m
        if (q <= 0) { printf "not even with no pool time at all"; exit }
        printf "the pool at %.3f ms of CPU a request (%.3f without batching): %.0f%% of a thread'"'"'s FMA peak", q, p, 100 * f / (q * 1e-3) / 1e9 / (pk / nt) }')
    check "medium $enc with batching across requests / without = $r req/s (target >= 1.3; p99 on ${BP99ON[$enc]}, off ${BP99OFF[$enc]}; with the rest of a request's CPU time unchanged, 1.3x needs $need)" "$r >= 1.3"
done
echo "$pass passed, $fail failed"
