#!/usr/bin/env bash
# Run every wrk script in tests/load/ and print one line each: req/s and
# p50/p90/p99 latency (what `make load` runs).
#
#   tests/load/run-load.sh [URL]
#
# With URL (e.g. http://127.0.0.1:8080): load that running server; a script
# whose weight set the server does not have (GET /v1/models/NAME != 200) is
# skipped with a note. Without URL: start bin/attention-server on a free
# loopback port with the demo set and build/load/{medium,large}.safetensors
# (written by make-weights.py when missing), load it, stop it.
#
# Environment: DURATION (5s per script), THREADS (2), CONNECTIONS (8),
# SCRIPTS (default: every tests/load/*.lua), ATTN_SERVER_BIN, ATTN_API_KEY.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
URL=${1:-}
DURATION=${DURATION:-5s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-8}
BIN=${ATTN_SERVER_BIN:-$root/bin/attention-server}
LOAD_DIR=${LOAD_DIR:-$root/build/load}
PY=/usr/bin/python3
# Small to large, float before base64; then any other script.
default_scripts() {
    local s size enc
    for size in small medium large; do
        for enc in float base64; do [ -f "$here/$size-$enc.lua" ] && echo "$here/$size-$enc.lua"; done
    done
    for s in "$here"/*.lua; do
        case $(basename "$s") in small-*|medium-*|large-*) ;; *) echo "$s" ;; esac
    done
}
scripts=${SCRIPTS:-$(default_scripts)}

command -v wrk >/dev/null || { echo "wrk missing: apt-get install -y wrk" >&2; exit 1; }

server_pid=
cleanup() { [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; }
trap cleanup EXIT

auth=()
[ -n "${ATTN_API_KEY:-}" ] && auth=(-H "Authorization: Bearer $ATTN_API_KEY")

if [ -z "$URL" ]; then
    [ -x "$BIN" ] || { echo "no server binary at $BIN: run make first, or pass URL" >&2; exit 1; }
    if [ ! -s "$LOAD_DIR/medium.safetensors" ] || [ ! -s "$LOAD_DIR/large.safetensors" ]; then
        "$PY" "$here/make-weights.py" "$LOAD_DIR" || exit 1
    fi
    port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    log=$LOAD_DIR/server.log
    "$BIN" --host 127.0.0.1 --port "$port" \
        --model "demo=$root/config/weights/demo.safetensors" \
        --model "medium=$LOAD_DIR/medium.safetensors" \
        --model "large=$LOAD_DIR/large.safetensors" >"$log" 2>&1 &
    server_pid=$!
    URL=http://127.0.0.1:$port
    for _ in $(seq 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && break
        kill -0 "$server_pid" 2>/dev/null || { echo "server failed to start:" >&2; tail -n 20 "$log" >&2; exit 1; }
        sleep 0.1
    done
    echo "server: $BIN on $URL ($(grep -m1 -o 'with [0-9]* compute threads' "$log" || echo '?'); log $log)"
fi

echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION against $URL"
status=0
for s in $scripts; do
    name=$(basename "$s" .lua)
    model=${ATTN_LOAD_MODEL:-$(sed -n 's/.*model = "\([^"]*\)".*/\1/p' "$s" | head -n1)}
    code=$(curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" "$URL/v1/models/$model")
    if [ "$code" != 200 ]; then
        printf '%-14s skipped: the server has no weight set "%s" (GET /v1/models/%s: %s)\n' "$name" "$model" "$model" "$code"
        continue
    fi
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 30s -s "$s" "$URL" 2>&1)
    line=$(grep -E ' req/s ' <<<"$out")
    if [ -n "$line" ]; then echo "$line"; else echo "$name: wrk failed:"; echo "$out" | tail -n 5; status=1; fi
done
exit $status
