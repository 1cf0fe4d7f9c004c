#!/usr/bin/env bash
# Load and overload check (what `make load-check` runs): the real daemon on
# 127.0.0.1 under wrk with mixed payloads (tests/soak/mixed.lua), loopback
# only, every phase bounded.
#
#   (a) capacity: a short run (CAPACITY_SECONDS, 16 connections) with the
#       small/medium mix measures this machine's req/s.
#   (b) below the admission limit: DURATION seconds at 64, then at 256
#       connections with the default --max-queue 256. Each connection has at
#       most one request out, so at most 256 are in the server and at most
#       256 - threads wait in the queue: no request may get 503 (or any other
#       non-2xx) and no socket error may occur.
#   (c) overload: a second daemon with --max-queue 8 (admits threads + 8
#       requests at once) under 256 connections of medium/large requests
#       (about 25 times what it admits) for DURATION seconds: every answer
#       must be 200 or 503, every 503 must carry Retry-After, /healthz must
#       stay quick, the queue must never exceed 8; once wrk stops, a new
#       request must succeed within RECOVERY_MS (1000 ms).
#
# Environment: DURATION (60 s per phase of (b) and (c)), CAPACITY_SECONDS (10),
# OVERLOAD_SECONDS (DURATION), OVERLOAD_QUEUE (8), OVERLOAD_CONNECTIONS (256),
# MIX (small-float:4,small-base64:4,medium-float:1,medium-base64:1),
# OVERLOAD_MIX (medium-float:3,medium-base64:3,large-float:1,large-base64:1),
# RECOVERY_MS (1000), PHASES ("a b c": a subset runs only those), plus those
# of lib.sh. Output in build/soak/load-check.*;
# prints a summary table and "N passed, N failed" last; exit 1 on failure.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=$(seconds "${DURATION:-60}")
CAPACITY_SECONDS=$(seconds "${CAPACITY_SECONDS:-10}")
OVERLOAD_SECONDS=$(seconds "${OVERLOAD_SECONDS:-$DURATION}")
OVERLOAD_QUEUE=${OVERLOAD_QUEUE:-8}
OVERLOAD_CONNECTIONS=${OVERLOAD_CONNECTIONS:-256}
MIX=${MIX:-small-float:4,small-base64:4,medium-float:1,medium-base64:1}
OVERLOAD_MIX=${OVERLOAD_MIX:-medium-float:3,medium-base64:3,large-float:1,large-base64:1}
RECOVERY_MS=${RECOVERY_MS:-1000}
PHASES=" ${PHASES:-a b c} "
capacity= recovered= threads=

need_tools
ensure_weights
rm -f "$OUT"/load-check-{default,overload}.{log,counts} "$OUT"/load-check-{capacity,c64,c256,overload}.{wrk,metrics} \
    "$OUT"/load-check-healthz.txt "$OUT"/load-check-recovery.txt{,.metrics}

echo "load-check: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); wrk -t$WRK_THREADS --timeout 30s -s tests/soak/mixed.lua"

# One small request for probes: 5 x 64 numbers, the demo set.
probe=$OUT/load-check-probe.json
awk 'BEGIN { x = 1; printf "{\"model\":\"demo\",\"embeddings\":["
    for (r = 0; r < 5; r++) { printf "%s[", r ? "," : ""
        for (c = 0; c < 64; c++) { x = (x * 16807) % 2147483647; printf "%s%.3f", c ? "," : "", (x % 2001 - 1000) / 1000 }
        printf "]" }
    printf "]}\n" }' >"$probe"
attend_probe() { curl -s -o /dev/null -m 5 -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$probe" "$URL/attend"; }

# run_phase NAME CONNECTIONS SECONDS MIX: wrk in the foreground with the
# /metrics sampler beside it; sets R[...] and R[max_in_flight], R[max_queue].
run_phase() {
    local name=$1 conns=$2 secs=$3 mix=$4 sampler
    mark "$name"
    : >"$OUT/load-check-$name.metrics"
    sample_metrics "$OUT/load-check-$name.metrics" &
    sampler=$!
    start_wrk "load-check-$name" "$conns" "$secs" "$mix"
    wait "$wrk_pid"
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    read_result "load-check-$name" || return 1
    # in_flight counts the /metrics request itself: subtract it.
    R[max_in_flight]=$(( $(max_col "$OUT/load-check-$name.metrics" 2) - 1 ))
    R[max_queue]=$(max_col "$OUT/load-check-$name.metrics" 3)
}

table_row() { # PHASE CONNECTIONS
    row "$1" "$2" "${R[duration_s]}" "${R[requests]}" "${R[rps]}" "${R[p50_ms]}" "${R[p99_ms]}" \
        "${R[s2xx]}" "${R[s503]} (${R[s503_retry_after]})" "$((R[non2xx] - R[s503]))" \
        "${R[sock]} (${R[connect]}/${R[read]}/${R[write]}/${R[timeout]})" "${R[max_in_flight]} / ${R[max_queue]}"
}

# ------------------------------------------------- (a) and (b): default queue
if [[ $PHASES == *" a "* || $PHASES == *" b "* ]]; then
start_daemon load-check-default --model "demo=$DEMO" --model "medium=$LOAD_DIR/medium.safetensors"
threads=$(grep -m1 -o 'with [0-9]* compute threads' "$OUT/load-check-default.log" | awk '{ print $2 }')

if [[ $PHASES == *" a "* ]] && run_phase capacity 16 "$CAPACITY_SECONDS" "$MIX"; then
    capacity=${R[rps]}
    table_row "(a) capacity, mix $MIX" 16
    check $(( R[requests] > 0 && R[non2xx] == 0 && R[sock] == 0 )) \
        "(a) capacity: ${R[rps]} req/s with the mix ($CAPACITY_SECONDS s, 16 connections); ${R[requests]} requests, ${R[non2xx]} non-2xx, ${R[sock]} socket errors"
fi

for conns in 64 256; do
    [[ $PHASES == *" b "* ]] || continue
    run_phase "c$conns" "$conns" "$DURATION" "$MIX" || continue
    table_row "(b) $conns connections, max-queue 256" "$conns"
    info "(b) $conns connections: ${R[requests]} requests, ${R[rps]} req/s, p50 ${R[p50_ms]} ms, p99 ${R[p99_ms]} ms, max ${R[max_ms]} ms; in flight up to ${R[max_in_flight]}, queue depth up to ${R[max_queue]} (sampled each second); statuses ${R[statuses]}"
    check $(( R[requests] > 0 && R[non2xx] == 0 )) \
        "(b) $conns connections for $DURATION s: zero non-2xx (${R[non2xx]} of ${R[requests]}; 503: ${R[s503]})"
    check $(( R[sock] == 0 )) \
        "(b) $conns connections: zero socket errors (connect ${R[connect]}, read ${R[read]}, write ${R[write]}, timeout ${R[timeout]})"
done

stop_daemon
check $(( stop_rc == 0 )) "default daemon stopped with SIGTERM, exit code $stop_rc"
for p in capacity c64 c256; do
    grep -q "__mark_$p" "$OUT/load-check-default.log" || continue
    bad=$(count_not load-check-default "$p" 200)
    check $(( bad == 0 )) "server side, phase $p: every /attend answer in the daemon's access log is 200 ($(counts load-check-default "$p"))"
done

fi

# ---------------------------------------------------------------- (c) overload
if [[ $PHASES == *" c "* ]]; then
start_daemon load-check-overload --max-queue "$OVERLOAD_QUEUE" --model "demo=$DEMO" \
    --model "medium=$LOAD_DIR/medium.safetensors" --model "large=$LOAD_DIR/large.safetensors"
othreads=$(grep -m1 -o 'with [0-9]* compute threads' "$OUT/load-check-overload.log" | awk '{ print $2 }')

# /healthz latency while overloaded: one probe a second (background).
hz=$OUT/load-check-healthz.txt
: >"$hz"
( sleep 2; while :; do curl -s -o /dev/null -m 5 -w '%{http_code} %{time_total}\n' "$URL/healthz" >>"$hz"; sleep 1; done ) &
hz_pid=$!
if run_phase overload "$OVERLOAD_CONNECTIONS" "$OVERLOAD_SECONDS" "$OVERLOAD_MIX"; then
    wrk_end=$(now)
    # Recovery: the first /attend answered 200 after wrk exits (a probe
    # every 50 ms). Beside it, what the daemon still holds: connections whose
    # client (wrk) has gone but whose request was already received.
    rec=$OUT/load-check-recovery.txt
    ( for _ in $(seq 16); do
          curl -s -m 2 "$URL/metrics" | awk -v t="$(ms_since "$wrk_end")" '
              $1 == "attention_server_in_flight_requests" { f = $2 - 1 }
              $1 == "attention_server_queue_depth" { q = $2 }
              END { print "metrics +" t "ms in_flight=" f " queue_depth=" q }'
          sleep 0.25
      done ) >"$rec.metrics" &
    rec_sampler=$!
    probes=0
    : >"$rec"
    while [ "$(ms_since "$wrk_end")" -lt 30000 ]; do
        probes=$((probes + 1))
        t0=$(ms_since "$wrk_end")
        code=$(attend_probe)
        echo "probe +${t0}ms -> $code after $(( $(ms_since "$wrk_end") - t0 )) ms" >>"$rec"
        if [ "$code" = 200 ]; then recovered=$(ms_since "$wrk_end"); break; fi
        sleep 0.05
    done
    wait "$rec_sampler" 2>/dev/null
    info "(c) after wrk exited: $(tr '\n' ';' <"$rec" | sed 's/;$//; s/;/; /g')"
    info "(c) the daemon's backlog then (orphaned requests of closed connections): $(head -n 6 "$rec.metrics" | sed 's/^metrics //' | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    kill "$hz_pid" 2>/dev/null; wait "$hz_pid" 2>/dev/null
    table_row "(c) overload, max-queue $OVERLOAD_QUEUE, mix $OVERLOAD_MIX" "$OVERLOAD_CONNECTIONS"
    admitted=$((othreads + OVERLOAD_QUEUE))
    ok_rps=$(awk -v n="${R[s2xx]}" -v d="${R[duration_s]}" 'BEGIN { printf "%.1f", n / d }')
    factor=$(awk -v a="${R[rps]}" -v b="$ok_rps" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "inf" }')
    info "(c) the daemon admits $othreads computing + $OVERLOAD_QUEUE queued = $admitted requests; $OVERLOAD_CONNECTIONS connections offer $(awk -v a="$OVERLOAD_CONNECTIONS" -v b="$admitted" 'BEGIN { printf "%.1f", a / b }') times that"
    info "(c) ${R[requests]} answers in ${R[duration_s]} s: ${R[rps]} attempts/s, $ok_rps served (200)/s, so $factor times what it serves; ${R[s503]} x 503 (${R[overloaded]} overloaded); statuses ${R[statuses]}"
    check $(( R[requests] > 0 && R[s2xx] + R[s503] == R[requests] && R[other] == 0 )) \
        "(c) overload: every answer is 200 or 503 (${R[s2xx]} x 200 + ${R[s503]} x 503 of ${R[requests]}; other ${R[other]})"
    check $(( R[s503] > 0 && R[s2xx] > 0 )) \
        "(c) overload is real and the daemon still serves: ${R[s503]} x 503 and ${R[s2xx]} x 200"
    check $(( R[s503_retry_after] == R[s503] )) \
        "(c) every 503 carries Retry-After (${R[s503_retry_after]} of ${R[s503]})"
    check $(( R[sock] == 0 )) \
        "(c) no connection dropped under overload: socket errors connect ${R[connect]}, read ${R[read]}, write ${R[write]}, timeout ${R[timeout]}"
    check $(( R[max_queue] <= OVERLOAD_QUEUE )) \
        "(c) the queue never exceeded --max-queue $OVERLOAD_QUEUE (max sampled depth ${R[max_queue]}; in flight up to ${R[max_in_flight]})"
    hz_n=$(wc -l <"$hz")
    hz_bad=$(awk '$1 != 200' "$hz" | wc -l)
    hz_max=$(awk '{ t = $2 * 1000; if (t > m) m = t } END { printf "%.1f", m }' "$hz")
    hz_p50=$(awk '{ print $2 * 1000 }' "$hz" | sort -n | awk '{ a[NR] = $1 } END { if (NR) printf "%.1f", a[int((NR + 1) / 2)] }')
    hz_ok=0
    [ "$hz_n" -gt 0 ] && [ "$hz_bad" = 0 ] && is_lt "$hz_max" 1000 && hz_ok=1
    check "$hz_ok" "(c) /healthz stays quick under overload: $hz_n probes, $hz_bad not 200, p50 $hz_p50 ms, max $hz_max ms (limit 1000 ms)"
    if [ -n "$recovered" ]; then
        check $(( recovered <= RECOVERY_MS )) \
            "(c) recovery: the first new /attend after the load stopped got 200 $recovered ms after wrk exited ($probes probe(s); limit $RECOVERY_MS ms)"
    else
        fail "(c) recovery: no /attend probe got 200 within 30 s after the load stopped ($probes probes)"
    fi
fi
kill "$hz_pid" 2>/dev/null; wait "$hz_pid" 2>/dev/null
stop_daemon
check $(( stop_rc == 0 )) "overload daemon stopped with SIGTERM, exit code $stop_rc"
bad=$(awk '$1 == "overload" && $2 != 200 && $2 != "503:overloaded" { n += $3 } END { print n + 0 }' "$OUT/load-check-overload.counts")
check $(( bad == 0 )) "server side, overload: every /attend answer is 200 or 503 overloaded ($(counts load-check-overload overload))"
fi

print_table \
    "| phase | connections | seconds | requests | req/s | p50 ms | p99 ms | 2xx | 503 (with Retry-After) | other non-2xx | socket errors (connect/read/write/timeout) | max in flight / queue depth |" \
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
[ -n "$capacity" ] && echo "capacity (a): $capacity req/s with the mix $MIX on this machine ($threads compute threads)"
[ -n "${recovered:-}" ] && echo "recovery after overload: $recovered ms; /healthz during overload: p50 ${hz_p50:-?} ms, max ${hz_max:-?} ms over ${hz_n:-0} probes"
finish
