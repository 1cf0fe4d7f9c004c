# lib.sh - shared by tests/soak/load-check.sh and tests/soak/soak.sh (sourced).
#
# Starts bin/attention-server on 127.0.0.1 (port 0: the daemon picks a free
# port and logs it) with its stderr going through tests/soak/logsum.awk, runs
# wrk with tests/soak/mixed.lua, samples /metrics and /proc, keeps PASS/FAIL
# counts, and kills everything it started (by pid) on exit.
#
# Environment: ATTN_SERVER_BIN (bin/attention-server), LOAD_DIR (build/load:
# medium/large weight sets, written by tests/load/make-weights.py when
# missing), SOAK_OUT (build/soak: logs, wrk output, CSV), WRK_THREADS (2).

set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${ATTN_SERVER_BIN:-$root/bin/attention-server}
LOAD_DIR=${LOAD_DIR:-$root/build/load}
OUT=${SOAK_OUT:-$root/build/soak}
DEMO=$root/config/weights/demo.safetensors
MIXED_LUA=$root/tests/soak/mixed.lua
LOGSUM=$root/tests/soak/logsum.awk
WRK_THREADS=${WRK_THREADS:-2}
PY=/usr/bin/python3
unset ATTN_LOAD_MODEL # would rename every case's weight set in attend.lua
mkdir -p "$OUT"

# ------------------------------------------------------------ reporting
. "$root/tests/report.sh"
# check OK MESSAGE: OK is 1 or 0 (or a shell test's exit status via $(( ))).
check() { if [ "$1" = 1 ]; then pass "$2"; else fail "$2"; fi; }

now() { date +%s.%N; }
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
# is_lt A B / pct_growth START END: arithmetic on decimals.
is_lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
pct_growth() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) print "inf"; else printf "%.2f", (b - a) * 100 / a }'; }
seconds() { local s=${1%s}; [[ $s =~ ^[0-9]+$ ]] || { echo "not a number of seconds: $1" >&2; exit 2; }; echo "$s"; }

# ------------------------------------------------------------ processes
# Only what this script started: its background jobs still running
# (`jobs -p`, so a pid already reaped and reused is never signalled).
daemon_pid= logsum_pid= URL=
cleanup() {
    local p
    trap - EXIT INT TERM
    for p in $(jobs -p); do
        [ "$p" = "$daemon_pid" ] || [ "$p" = "$logsum_pid" ] || kill -TERM "$p" 2>/dev/null
    done
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null
        for _ in $(seq 50); do [ "$(proc_state "$daemon_pid")" = Z ] && break; kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
        [ "$(proc_state "$daemon_pid")" = Z ] || kill -KILL "$daemon_pid" 2>/dev/null
    fi
    for p in $(jobs -p); do wait "$p" 2>/dev/null; done
    rm -f "$OUT"/*.fifo
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM HUP
trap 'exit 141' PIPE

need_tools() {
    local t
    for t in wrk curl awk; do
        command -v "$t" >/dev/null || { fail "missing $t (apt-get install -y wrk curl)"; finish; }
    done
    [ -x "$BIN" ] || { fail "no server binary at $BIN (make bin/attention-server)"; finish; }
}

# ensure_weights: build/load/{medium,large}.safetensors (PyTorch, fixed seeds).
ensure_weights() {
    if [ ! -s "$LOAD_DIR/medium.safetensors" ] || [ ! -s "$LOAD_DIR/large.safetensors" ]; then
        "$PY" "$root/tests/load/make-weights.py" "$LOAD_DIR" || { fail "tests/load/make-weights.py failed"; finish; }
    fi
}

http_code() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$@"; }

# start_daemon NAME ARGS...: the daemon on 127.0.0.1, a free port; its log
# (without 200 access lines) in $OUT/NAME.log, /attend counts per phase in
# $OUT/NAME.counts once it exits. Sets daemon_pid, logsum_pid, URL.
start_daemon() {
    local name=$1 port= fifo=$OUT/$1.fifo
    shift
    rm -f "$fifo" "$OUT/$name.counts"
    mkfifo "$fifo"
    # mawk (Debian's awk) reads a pipe in large blocks unless -W interactive.
    local awk_args=()
    awk -W version 2>&1 | grep -q mawk && awk_args=(-W interactive)
    awk "${awk_args[@]}" -v counts="$OUT/$name.counts" -f "$LOGSUM" <"$fifo" >"$OUT/$name.log" &
    logsum_pid=$!
    "$BIN" --host 127.0.0.1 --port 0 --log-format text "$@" >/dev/null 2>"$fifo" &
    daemon_pid=$!
    for _ in $(seq 300); do
        port=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$OUT/$name.log" | head -n1)
        [ -n "$port" ] && break
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        fail "daemon '$name' did not start: $BIN $*"
        tail -n 20 "$OUT/$name.log" | sed 's/^/     /'
        finish
    fi
    URL=http://127.0.0.1:$port
    for _ in $(seq 100); do [ "$(http_code "$URL/readyz")" = 200 ] && break; sleep 0.1; done
    info "daemon '$name' (pid $daemon_pid) on $URL: $(grep -m1 -o 'with [0-9]* compute threads, [0-9]* I/O threads' "$OUT/$name.log"); $*"
}

# stop_daemon: SIGTERM, wait (bounded), then the log summariser. Sets stop_rc.
stop_daemon() {
    stop_rc=
    [ -n "$daemon_pid" ] || return
    kill -TERM "$daemon_pid" 2>/dev/null
    local deadline=$((SECONDS + 40))
    while [ -e "/proc/$daemon_pid" ] && [ "$(proc_state "$daemon_pid")" != Z ] && [ $SECONDS -lt $deadline ]; do
        sleep 0.05
    done
    [ "$(proc_state "$daemon_pid")" = Z ] || [ ! -e "/proc/$daemon_pid" ] || kill -KILL "$daemon_pid" 2>/dev/null
    wait "$daemon_pid"
    stop_rc=$?
    wait "$logsum_pid" 2>/dev/null
    daemon_pid= logsum_pid=
}

proc_state() { awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null; }

# mark NAME: start phase NAME in the daemon's /attend counts (logsum.awk).
mark() { curl -s -o /dev/null -m 5 "$URL/v1/models/__mark_$1"; }

# counts NAME PHASE: "STATUS[:TYPE]=N ..." for that phase; count_of NAME PHASE KEY.
counts() { awk -v p="$2" '$1 == p { printf "%s%s=%s", sep, $2, $3; sep = " " }' "$OUT/$1.counts"; }
count_of() { awk -v p="$2" -v k="$3" '$1 == p && $2 == k { n += $3 } END { print n + 0 }' "$OUT/$1.counts"; }
count_not() { awk -v p="$2" -v k="$3" '$1 == p && $2 != k { n += $3 } END { print n + 0 }' "$OUT/$1.counts"; }

# metric NAME: the value of an unlabelled gauge from /metrics (empty if none).
metric() { curl -s -m 5 "$URL/metrics" | awk -v m="$1" '$1 == m { print $2; exit }'; }

# sample_metrics FILE: every second, "unix_time in_flight queue_depth" (background).
sample_metrics() {
    while :; do
        curl -s -m 2 "$URL/metrics" | awk -v t="$(date +%s)" '
            $1 == "attention_server_in_flight_requests" { f = $2 }
            $1 == "attention_server_queue_depth" { q = $2 }
            END { if (f != "") print t, f, q }' >>"$1"
        sleep 1
    done
}
# max_col FILE COL
max_col() { awk -v c="$2" 'NR == 1 || $c > m { m = $c } END { print m + 0 }' "$1" 2>/dev/null; }

# start_wrk NAME CONNECTIONS SECONDS MIX: wrk in the background (bounded by
# timeout), output in $OUT/NAME.wrk; sets wrk_pid.
start_wrk() {
    local name=$1 conns=$2 secs=$3 mix=$4
    MIX=$mix timeout -k 5 $((secs + 120)) wrk -t"$WRK_THREADS" -c"$conns" -d"${secs}s" --timeout 30s \
        -s "$MIXED_LUA" "$URL" >"$OUT/$name.wrk" 2>&1 &
    wrk_pid=$!
}

# read_result NAME: fields of wrk's RESULT line (mixed.lua) into R[...].
declare -A R
read_result() {
    local line kv
    R=()
    line=$(grep -m1 '^RESULT ' "$OUT/$1.wrk")
    if [ -z "$line" ]; then
        fail "$1: wrk printed no RESULT line:"
        tail -n 5 "$OUT/$1.wrk" | sed 's/^/     /'
        return 1
    fi
    for kv in ${line#RESULT }; do R[${kv%%=*}]=${kv#*=}; done
    R[sock]=$((R[connect] + R[read] + R[write] + R[timeout]))
    R[non2xx]=$((R[requests] - R[s2xx]))
}

# Summary table: one row per phase.
declare -a rows=()
row() { local r="|" c; for c in "$@"; do r+=" $c |"; done; rows+=("$r"); }
print_table() {
    echo
    printf '%s\n' "$1"
    printf '%s\n' "$2"
    printf '%s\n' "${rows[@]}"
    echo
}
