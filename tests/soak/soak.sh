#!/usr/bin/env bash
# Soak and drain check (what `make soak` runs): the real daemon on 127.0.0.1
# (demo and medium weight sets) under steady mixed load from wrk
# (tests/soak/mixed.lua), then SIGTERM under load. Loopback only, bounded.
#
#   soak:  SOAK_SECONDS (600) of SOAK_CONNECTIONS (32) connections with the
#          small/medium mix. Every SOAK_INTERVAL (10) seconds the daemon's
#          RSS (VmRSS), open fds (/proc/PID/fd) and threads (/proc/PID/status)
#          go to build/soak/soak.csv, with in-flight, queue depth and the
#          /attend request count from /metrics. Start = the sample at
#          SOAK_WARMUP (120) s, end = the last one (at SOAK_SECONDS, still
#          under load); each must grow by less than GROWTH_LIMIT (5) percent.
#          wrk must see no non-2xx answer and no socket error.
#   drain: a new wrk run (DRAIN_CONNECTIONS, 64) on the same daemon; after
#          DRAIN_AFTER (5) s, SIGTERM. The daemon must exit 0 within its
#          shutdown grace (GRACE_MS, 25000), /readyz must answer 503 while it
#          drains, and every request admitted before the signal must get its
#          200: no other status on either side, no admitted request cancelled,
#          no drain timeout, and wrk must have received exactly as many 200s as
#          the daemon logged. New requests that arrive during the drain get
#          503 not_ready by design (a load balancer retries them elsewhere);
#          they are counted separately, as are the connection errors wrk sees
#          once the daemon has exited (it keeps sending until stopped, 0.5 s
#          after the exit).
#
# Environment: the names above, MIX (small-float:4,small-base64:4,
# medium-float:1,medium-base64:1), plus those of lib.sh. Output in
# build/soak/soak.*; prints the figures and "N passed, N failed" last.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SOAK_SECONDS=$(seconds "${SOAK_SECONDS:-600}")
SOAK_INTERVAL=$(seconds "${SOAK_INTERVAL:-10}")
SOAK_WARMUP=$(seconds "${SOAK_WARMUP:-120}")
SOAK_CONNECTIONS=${SOAK_CONNECTIONS:-32}
GROWTH_LIMIT=${GROWTH_LIMIT:-5}
DRAIN_CONNECTIONS=${DRAIN_CONNECTIONS:-64}
DRAIN_AFTER=$(seconds "${DRAIN_AFTER:-5}")
GRACE_MS=${GRACE_MS:-25000}
MIX=${MIX:-small-float:4,small-base64:4,medium-float:1,medium-base64:1}
CSV=$OUT/soak.csv

need_tools
ensure_weights
rm -f "$CSV" "$OUT"/soak.{log,counts,wrk} "$OUT"/soak-drain.wrk "$OUT"/soak-readyz.txt

echo "soak: $SOAK_SECONDS s, $SOAK_CONNECTIONS connections, mix $MIX; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_daemon soak --model "demo=$DEMO" --model "medium=$LOAD_DIR/medium.safetensors" --shutdown-grace-ms "$GRACE_MS"
pid=$daemon_pid

# ------------------------------------------------------------------- soak
# One CSV row: elapsed_s,rss_kb,fds,threads,in_flight,queue_depth,attend_requests
sample() {
    local t=$1 rss thr fds m
    rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
    thr=$(awk '$1 == "Threads:" { print $2 }' "/proc/$pid/status" 2>/dev/null)
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    m=$(curl -s -m 5 "$URL/metrics" | awk '
        $1 == "attention_server_in_flight_requests" { f = $2 - 1 }   # minus this request
        $1 == "attention_server_queue_depth" { q = $2 }
        index($1, "attention_server_requests_total{route=\"/attend\"") == 1 { n += $2 }
        END { printf "%s,%s,%d", f, q, n }')
    echo "$t,${rss:-},$fds,${thr:-},$m" >>"$CSV"
}

echo "elapsed_s,rss_kb,fds,threads,in_flight,queue_depth,attend_requests" >"$CSV"
mark soak
start_wrk soak "$SOAK_CONNECTIONS" $((SOAK_SECONDS + 3)) "$MIX"
soak_wrk=$wrk_pid
t0=$(now)
for ((k = 0; k * SOAK_INTERVAL <= SOAK_SECONDS; k++)); do
    target=$((k * SOAK_INTERVAL))
    delay=$(awk -v t0="$t0" -v t="$target" -v n="$(now)" 'BEGIN { d = t0 + t - n; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$delay"
    kill -0 "$pid" 2>/dev/null || { fail "the daemon died during the soak at about $target s"; tail -n 20 "$OUT/soak.log" | sed 's/^/     /'; finish; }
    sample "$target"
    IFS=, read -r t rss fds thr f q n < <(tail -n 1 "$CSV")
    printf '     t=%4ss  rss %7s kB  fds %4s  threads %3s  in flight %4s  queue %4s  /attend answers %s\n' "$t" "$rss" "$fds" "$thr" "$f" "$q" "$n"
done
wait "$soak_wrk"
read_result soak
soak_ok=$?

# start (first row at or after the warm-up) and end (last row) of a column.
col_at() { awk -F, -v c="$1" -v w="$SOAK_WARMUP" -v which="$2" '
    NR == 1 { next }
    which == "start" && $1 >= w && s == "" { s = $c }
    which == "max" && (m == "" || $c + 0 > m + 0) && $1 >= w { m = $c }
    { e = $c }
    END { print which == "start" ? s : which == "max" ? m : e }' "$CSV"; }
declare -A S E M G
growth_rows=()
for col in rss_kb:2 fds:3 threads:4; do
    name=${col%%:*} c=${col#*:}
    S[$name]=$(col_at "$c" start) E[$name]=$(col_at "$c" end) M[$name]=$(col_at "$c" max)
    G[$name]=$(pct_growth "${S[$name]}" "${E[$name]}")
    growth_rows+=("| $name | ${S[$name]} | ${E[$name]} | ${M[$name]} | ${G[$name]} % | < $GROWTH_LIMIT % |")
done
if [ "$soak_ok" = 0 ]; then
    info "soak wrk: ${R[requests]} requests in ${R[duration_s]} s, ${R[rps]} req/s, p50 ${R[p50_ms]} ms, p90 ${R[p90_ms]} ms, p99 ${R[p99_ms]} ms, max ${R[max_ms]} ms; statuses ${R[statuses]}"
    check $(( R[requests] > 0 && R[non2xx] == 0 )) \
        "soak: zero non-2xx over $SOAK_SECONDS s (${R[non2xx]} of ${R[requests]})"
    check $(( R[sock] == 0 )) \
        "soak: zero socket errors (connect ${R[connect]}, read ${R[read]}, write ${R[write]}, timeout ${R[timeout]})"
    soak_row="| soak | $SOAK_CONNECTIONS | ${R[duration_s]} | ${R[requests]} | ${R[rps]} | ${R[p50_ms]} | ${R[p99_ms]} | ${R[non2xx]} | ${R[sock]} |"
fi
# Not a check: the same over the second half of the run. A leak grows there
# as well; an allocator settling to its working set after the warm-up does not.
half=$(awk -F, -v h=$((SOAK_SECONDS / 2)) 'NR > 1 && $1 >= h { print $1; exit }' "$CSV")
if [ -n "$half" ]; then
    for name in rss_kb:2 fds:3 threads:4; do
        h=$(awk -F, -v c="${name#*:}" -v t="$half" 'NR > 1 && $1 == t { print $c }' "$CSV")
        info "second half, ${name%%:*}: ${h} (t=$half s) to ${E[${name%%:*}]} (t=$SOAK_SECONDS s): $(pct_growth "$h" "${E[${name%%:*}]}") %"
    done
fi
for name in rss_kb fds threads; do
    ok=0
    [ -n "${S[$name]}" ] && [ "${G[$name]}" != inf ] && is_lt "${G[$name]}" "$GROWTH_LIMIT" && ok=1
    check "$ok" "soak: $name from ${S[$name]} (t=${SOAK_WARMUP} s) to ${E[$name]} (t=${SOAK_SECONDS} s): ${G[$name]} % (max ${M[$name]}; limit < $GROWTH_LIMIT %)"
done

# ------------------------------------------------------------------ drain
# Let the soak's last requests (wrk abandons what it has out when it stops)
# finish, so the drain phase's counts hold only its own requests.
for _ in $(seq 100); do [ "$(metric attention_server_in_flight_requests)" = 1 ] && break; sleep 0.1; done
mark drain
drain_secs=$((DRAIN_AFTER + GRACE_MS / 1000 + 30))
start_wrk soak-drain "$DRAIN_CONNECTIONS" "$drain_secs" "$MIX"
drain_wrk=$wrk_pid
sleep "$DRAIN_AFTER"
in_flight_before=$(( $(metric attention_server_in_flight_requests) - 1 ))
queue_before=$(metric attention_server_queue_depth)
t_sig=$(now)
kill -TERM "$pid"
# /readyz every 10 ms until the daemon has exited: 503 while it drains (or
# no answer once it has stopped listening); never 200.
( while [ -e "/proc/$pid" ] && [ "$(proc_state "$pid")" != Z ]; do
      code=$(curl -s -o /dev/null -m 1 -w '%{http_code}' "$URL/readyz")
      echo "$(ms_since "$t_sig") $code"
      sleep 0.01
  done ) >"$OUT/soak-readyz.txt" &
readyz_pid=$!
exit_t=
while [ "$(ms_since "$t_sig")" -lt $((GRACE_MS + 10000)) ]; do
    if [ ! -e "/proc/$pid" ] || [ "$(proc_state "$pid")" = Z ]; then exit_t=$(now); break; fi
    sleep 0.02
done
drain_ms=$( [ -n "$exit_t" ] && awk -v a="$t_sig" -v b="$exit_t" 'BEGIN { printf "%.0f", (b - a) * 1000 }' || echo "-")
sleep 0.5
kill -INT "$drain_wrk" 2>/dev/null # wrk stops and prints its report
wait "$drain_wrk"
if [ -z "$exit_t" ]; then kill -KILL "$pid" 2>/dev/null; fi
wait "$pid"
exit_rc=$?
wait "$readyz_pid"
readyz=$(awk '{ n[$2]++ } END { for (c in n) { printf "%s%s x %s", sep, n[c], (c == "000" ? "no answer" : c); sep = ", " } }' "$OUT/soak-readyz.txt")
readyz_200=$(awk '$2 == 200' "$OUT/soak-readyz.txt" | wc -l)
readyz_503=$(awk '$2 == 503 { print $1 " ms"; exit }' "$OUT/soak-readyz.txt")
wait "$logsum_pid" 2>/dev/null
daemon_pid= logsum_pid=

grace_over=$(grep -c 'grace period over' "$OUT/soak.log")
srv_pre_200=$(count_of soak drain 200)
srv_pre_bad=$(count_not soak drain 200)
srv_post_200=$(count_of soak drain+sigterm 200)
srv_post_refused=$(count_of soak drain+sigterm 503:not_ready)
srv_post_bad=$(awk '$1 == "drain+sigterm" && $2 != 200 && $2 != "503:not_ready" { n += $3 } END { print n + 0 }' "$OUT/soak.counts")
info "drain: SIGTERM after $DRAIN_AFTER s of $DRAIN_CONNECTIONS connections, with $in_flight_before requests in flight ($queue_before queued); exit code $exit_rc after $drain_ms ms"
info "drain, daemon's access log: before SIGTERM $(counts soak drain); after it: $(counts soak drain+sigterm) (200 = admitted before the signal and finished during the drain)"
if read_result soak-drain; then
    info "drain, wrk: ${R[requests]} answers: ${R[statuses]}; 503 not_ready refusing a new request during the drain: ${R[drain_refused]}; socket errors after the exit: connect ${R[connect]}, read ${R[read]}, write ${R[write]}, timeout ${R[timeout]}"
    check $(( R[s2xx] == srv_pre_200 + srv_post_200 )) \
        "drain: wrk received every 200 the daemon sent (wrk ${R[s2xx]}, daemon $srv_pre_200 before + $srv_post_200 after SIGTERM)"
    check $(( R[other] == 0 && R[overloaded] == 0 && R[not_ready] == R[drain_refused] && R[timeout] == 0 )) \
        "drain: no admitted request failed on the client side (other statuses ${R[other]}, 503 overloaded ${R[overloaded]}, 503 not_ready for an admitted request $((R[not_ready] - R[drain_refused])), timeouts ${R[timeout]})"
    drain_row="| drain | $DRAIN_CONNECTIONS | ${R[duration_s]} | ${R[requests]} | ${R[s2xx]} | $srv_post_200 | ${R[drain_refused]} | ${R[connect]}/${R[read]}/${R[write]}/${R[timeout]} | $in_flight_before | $drain_ms | $exit_rc |"
fi
check $(( exit_rc == 0 )) "drain: the daemon exited with code 0 ($exit_rc)"
ok=0; [ "$drain_ms" != - ] && [ "$drain_ms" -lt "$GRACE_MS" ] && ok=1
check "$ok" "drain: it exited $drain_ms ms after SIGTERM, within the shutdown grace ($GRACE_MS ms)"
check $(( grace_over == 0 )) "drain: no request left in flight when the grace ran out (daemon log: $grace_over warnings)"
check $(( readyz_200 == 0 )) "drain: /readyz never answered 200 after SIGTERM (probes every 10 ms until the exit: ${readyz:-none}; first 503 ${readyz_503:-never})"
check $(( srv_post_200 > 0 )) "drain: requests in flight at SIGTERM finished with 200 during the drain ($srv_post_200)"
check $(( srv_pre_bad == 0 && srv_post_bad == 0 )) \
    "drain, daemon side: only 200 before SIGTERM ($srv_pre_bad others) and only 200 or 503 not_ready after it ($srv_post_bad others; $srv_post_refused not_ready)"

echo
echo "| load | connections | seconds | requests | req/s | p50 ms | p99 ms | non-2xx | socket errors |"
echo "|---|---|---|---|---|---|---|---|---|"
echo "${soak_row:-| soak | - |}"
echo
echo "| resource | start (t=$SOAK_WARMUP s) | end (t=$SOAK_SECONDS s) | max | growth | limit |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${growth_rows[@]}"
echo
echo "| drain | connections | wrk seconds | answers | 200 | 200 finished during drain | 503 not_ready (new, refused) | socket errors after exit (connect/read/write/timeout) | in flight at SIGTERM | exit after ms | exit code |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
echo "${drain_row:-| drain | - |}"
echo
echo "samples: $CSV; logs: $OUT/soak.log, $OUT/soak.wrk, $OUT/soak-drain.wrk"
finish
