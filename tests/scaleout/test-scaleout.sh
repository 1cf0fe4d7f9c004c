#!/usr/bin/env bash
# Scale-out behaviour, with real processes on loopback (what `make test-scaleout`
# runs): three daemons (bin/attention-server) behind a real nginx (Debian's
# package, run in the foreground from a temporary prefix) configured with the
# shipped docker/nginx-proxy.conf, under load from wrk (tests/load/small-float.lua).
#
#   phase 1: kill -9 one replica mid-run. nginx retries its in-flight and next
#            requests on the others: clients must see no error. Reports how
#            long until traffic ran on the survivors only.
#   phase 2: SIGTERM one replica mid-run (the restarted one from phase 1 is
#            back). It drains: /readyz 503 at once, in-flight requests finish,
#            exit 0. Clients must lose no request.
#   phase 3: SIGTERM a replica with one long request in flight, no load
#            balancer: /readyz must turn 503, the request finish, exit 0.
#
# Environment: PHASE_SECS (10), CONNS (wrk connections, 16),
# ATTN_SERVER_BIN (bin/attention-server). Everything listens on and talks to
# 127.0.0.1 only. Prints "N passed, N failed" last; exit 1 on failure.
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${ATTN_SERVER_BIN:-$root/bin/attention-server}
DEMO=$root/config/weights/demo.safetensors
NGINX=${NGINX:-/usr/sbin/nginx}
PHASE_SECS=${PHASE_SECS:-10}
CONNS=${CONNS:-16}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

. "$root/tests/report.sh"

tmp=$(mktemp -d /tmp/attn-scaleout.XXXXXX)
chmod 755 "$tmp"    # nginx workers (user nobody) must reach their temp dirs
declare -a rpid rport
nginx_pid= wrk_pid=
cleanup() {
    # Only what this script started, by pid.
    [ -n "$wrk_pid" ] && kill "$wrk_pid" 2>/dev/null
    [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null
    for p in "${rpid[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ -n "${KEEP_TMP:-}" ]; then echo "logs kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

for need in "$BIN" "$NGINX" "$(command -v wrk)" "$DEMO"; do
    [ -e "$need" ] || { fail "missing: ${need:-wrk} (make deps; apt-get install -y nginx-light wrk)"; finish; }
done

# free_ports N: N distinct free TCP ports on 127.0.0.1 (held together while chosen).
free_ports() {
    $PY -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

http_code() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$1"; }
wait_code() { # URL CODE SECONDS
    local deadline=$((SECONDS + $3))
    while [ $SECONDS -lt $deadline ]; do
        [ "$(http_code "$1")" = "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
now() { date +%s.%N; }
proc_state() { awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null; }

# start_replica I PORT: one daemon, one compute thread (3 replicas share 2 cores).
start_replica() {
    rport[$1]=$2
    "$BIN" --host 127.0.0.1 --port "$2" --model "demo=$DEMO" --threads 1 >>"$tmp/replica$1.log" 2>&1 &
    rpid[$1]=$!
}

# start_nginx PHASE: nginx in front of the replicas in rport, on $lb_port.
start_nginx() {
    local phase=$1 servers="" i
    for i in "${!rport[@]}"; do
        # fail_timeout longer than a phase: a failed replica is not probed again
        # within it, so "traffic moved" has one clear moment.
        servers+="        server 127.0.0.1:${rport[$i]} max_fails=1 fail_timeout=30s;"$'\n'
    done
    mkdir -p "$tmp/nginx"
    cat >"$tmp/nginx-$phase.conf" <<EOF
daemon off;
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
events { worker_connections 1024; }
http {
    log_format failover '\$msec|\$request_time|\$status|\$upstream_addr|\$upstream_status';
    access_log $tmp/access-$phase.log failover buffer=64k flush=1s;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    upstream attention {
        zone attention 64k;
$servers        keepalive 32;
    }
    server {
        listen 127.0.0.1:$lb_port;
        location / {
            include $root/docker/nginx-proxy.conf;
        }
    }
}
EOF
    "$NGINX" -p "$tmp/nginx" -c "$tmp/nginx-$phase.conf" -e "$tmp/nginx-error.log" &
    nginx_pid=$!
    wait_code "http://127.0.0.1:$lb_port/readyz" 200 10
}

stop_nginx() {
    kill -QUIT "$nginx_pid" 2>/dev/null
    wait "$nginx_pid" 2>/dev/null
    nginx_pid=
}

# wrk_counts FILE: "requests non2xx socket_errors" from wrk's report.
wrk_counts() {
    awk '
        / requests in / { req = $1 }
        /Non-2xx or 3xx responses:/ { non = $NF }
        /Socket errors:/ { gsub(/,/, ""); sock = $4 + $6 + $8 + $10 }
        END { printf "%d %d %d\n", req, non, sock }' "$1"
}

# run_load PHASE ACTION: wrk through nginx for PHASE_SECS; ACTION (a function)
# runs 40% of the way in; sets event_t to when it ran.
run_load() {
    local phase=$1 action=$2
    timeout $((PHASE_SECS + 30)) wrk -t2 -c"$CONNS" -d"${PHASE_SECS}s" --timeout 10s \
        -s "$root/tests/load/small-float.lua" "http://127.0.0.1:$lb_port" >"$tmp/wrk-$phase.txt" 2>&1 &
    wrk_pid=$!
    sleep "$(awk -v s="$PHASE_SECS" 'BEGIN { print s * 0.4 }')"
    event_t=$(now)
    $action
    wait "$wrk_pid" 2>/dev/null   # (quiet: bash would report the killed replica here)
    wrk_pid=
}

# ------------------------------------------------------------------ start
read -r p0 p1 p2 p3 lb_port <<<"$(free_ports 5)"
start_replica 0 "$p0"
start_replica 1 "$p1"
start_replica 2 "$p2"
ok=1
for i in 0 1 2; do
    wait_code "http://127.0.0.1:${rport[$i]}/readyz" 200 30 || { ok=0; fail "replica $i ready on :${rport[$i]}"; tail -n 5 "$tmp/replica$i.log" | sed 's/^/     /'; }
done
[ $ok = 1 ] && pass "3 replicas ready on 127.0.0.1:$p0, :$p1, :$p2 (1 compute thread each)"
[ $ok = 1 ] || finish
if start_nginx 1; then pass "nginx ($("$NGINX" -v 2>&1 | sed 's/.*\///')) in front of them on 127.0.0.1:$lb_port"; else
    fail "nginx did not come up"; sed 's/^/     /' "$tmp/nginx-error.log"; finish; fi
code=$(curl -s -o "$tmp/one.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data '{"embeddings":[[0.5],[0.25]]}' "http://127.0.0.1:$lb_port/attend")
[ "$code" = 400 ] && pass "a bad request through nginx gets the replica's 400 (nginx does not retry 4xx)" \
    || fail "bad request through nginx: $code $(head -c 200 "$tmp/one.json")"

# ----------------------------------------------------- phase 1: kill -9
kill_replica() { kill -KILL "${rpid[0]}"; }
run_load 1 kill_replica
wait "${rpid[0]}" 2>/dev/null
rpid[0]=
stop_nginx    # flushes its access log
read -r req non sock <<<"$(wrk_counts "$tmp/wrk-1.txt")"
info "phase 1, kill -9 replica 0 (:$p0) at +$(awk -v s="$PHASE_SECS" 'BEGIN { print s * 0.4 }') s of $PHASE_SECS s, $CONNS connections:"
info "wrk: $req requests, $non non-2xx, $sock socket errors"
eval "$($PY "$root/tests/scaleout/nginx_log.py" "$tmp/access-1.log" "$event_t" "127.0.0.1:$p0" | tee "$tmp/analysis-1.txt" | tail -n 1)"
head -n -1 "$tmp/analysis-1.txt"
info "traffic on the survivors only ${failover_ms} ms after the kill (longest request around it ${spike_ms} ms; median before ${p50_ms} ms)"
[ "$req" -gt 0 ] && [ "$non" = 0 ] && [ "$sock" = 0 ] \
    && pass "phase 1 (kill -9): clients saw no error: $req requests, 0 non-2xx, 0 socket errors" \
    || fail "phase 1 (kill -9): $req requests, $non non-2xx, $sock socket errors"
[ "$late_touched" = 0 ] && [ "$errors5xx" = 0 ] \
    && pass "phase 1: traffic moved to the survivors within ${failover_ms} ms; $touched requests touched the dead replica, all answered" \
    || fail "phase 1: $late_touched requests still tried the dead replica > 1 s after the kill; nginx answered $errors5xx with 5xx"

# ---------------------------------------------- phase 2: SIGTERM (drain)
start_replica 0 "$p3"
wait_code "http://127.0.0.1:$p3/readyz" 200 30 || fail "replica 0 restarted on :$p3"
start_nginx 2 || { fail "nginx restart for phase 2"; finish; }
drain_code= term_t=
term_replica() {
    term_t=$(now)
    kill -TERM "${rpid[1]}"
    drain_code=$(http_code "http://127.0.0.1:$p1/readyz")
    # Note when it exits (still our child: a zombie until reaped, hence /proc).
    ( while [ "$(proc_state "${rpid[1]}")" != Z ] && [ -e "/proc/${rpid[1]}" ]; do sleep 0.02; done
      now >"$tmp/exit-time" ) &
}
run_load 2 term_replica
# The drain ends within shutdown_grace_ms (25 s) unless something hangs.
deadline=$((SECONDS + 30))
while [ ! -s "$tmp/exit-time" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
if [ -s "$tmp/exit-time" ]; then
    wait "${rpid[1]}"; exit_rc=$?
    drain_ms=$(awk -v a="$term_t" -v b="$(cat "$tmp/exit-time")" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
else
    exit_rc="still running 30 s after SIGTERM" drain_ms=-
fi
rpid[1]=
stop_nginx
read -r req non sock <<<"$(wrk_counts "$tmp/wrk-2.txt")"
info "phase 2, SIGTERM replica 1 (:$p1) at +$(awk -v s="$PHASE_SECS" 'BEGIN { print s * 0.4 }') s of $PHASE_SECS s, $CONNS connections:"
info "wrk: $req requests, $non non-2xx, $sock socket errors"
eval "$($PY "$root/tests/scaleout/nginx_log.py" "$tmp/access-2.log" "$event_t" "127.0.0.1:$p1" | tee "$tmp/analysis-2.txt" | tail -n 1)"
head -n -1 "$tmp/analysis-2.txt"
info "traffic on the others only ${failover_ms} ms after SIGTERM (longest request around it ${spike_ms} ms; median before ${p50_ms} ms)"
[ "$req" -gt 0 ] && [ "$non" = 0 ] && [ "$sock" = 0 ] \
    && pass "phase 2 (SIGTERM): no request lost: $req requests, 0 non-2xx, 0 socket errors" \
    || fail "phase 2 (SIGTERM): $req requests, $non non-2xx, $sock socket errors"
case $drain_code in
503) info "/readyz of the draining replica answered 503 right after SIGTERM" ;;
000) info "/readyz of the draining replica could not be reached right after SIGTERM (port closed)" ;;
*) fail "phase 2: /readyz right after SIGTERM answered $drain_code" ;;
esac
[ "$exit_rc" = 0 ] && pass "phase 2: the drained replica exited with code 0, ${drain_ms} ms after SIGTERM" \
    || fail "phase 2: the drained replica's exit: $exit_rc (${drain_ms} ms after SIGTERM)"; tail -n 3 "$tmp/replica1.log" | cut -c1-200 | sed 's/^/     /'

# --------------------------------------------------------- the survivors
ok=1
for i in 0 2; do [ "$(http_code "http://127.0.0.1:${rport[$i]}/healthz")" = 200 ] || ok=0; done
[ $ok = 1 ] && pass "the other replicas are still healthy" || fail "a surviving replica stopped answering /healthz"

# ------------------------------------------- phase 3: the drain, slowly
# What load balancers and Kubernetes rely on (API.md, SIGTERM): readiness
# turns 503 at once, in-flight requests finish, then exit 0. Made visible with
# one long request (8 x 4096 tokens, about a second of compute on one thread)
# in flight on replica 2 when SIGTERM arrives.
$PY -c '
import array, base64, json, random, sys
B, n, E = 8, 4096, 64
rnd = random.Random(7)
x = array.array("f", (rnd.uniform(-1, 1) for _ in range(B * n * E)))
if sys.byteorder != "little": x.byteswap()
json.dump({"model": "demo", "need_weights": False, "encoding_format": "base64",
           "embeddings": {"dtype": "float32", "shape": [B, n, E], "base64": base64.b64encode(x.tobytes()).decode()}},
          open(sys.argv[1], "w"))' "$tmp/slow.json"
url2=http://127.0.0.1:${rport[2]}
curl -s -m 60 -o /dev/null -w '%{http_code} %{time_total}' -H 'Content-Type: application/json' \
    --data-binary @"$tmp/slow.json" "$url2/attend" >"$tmp/slow.out" &
slow_pid=$!
sleep 0.4
term_t=$(now)
kill -TERM "${rpid[2]}"
sleep 0.05
ready_during=$(http_code "$url2/readyz")
attend_during=$(curl -s -o /dev/null -m 5 -w '%{http_code}' -H 'Content-Type: application/json' \
    --data '{"embeddings":[[0.5]]}' "$url2/attend")
wait "$slow_pid"
read -r slow_code slow_secs <"$tmp/slow.out"
wait "${rpid[2]}"; rc2=$?
rpid[2]=
drain_ms=$(awk -v a="$term_t" -v b="$(now)" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
info "phase 3: SIGTERM with one long request in flight: /readyz then $ready_during, new POST /attend $attend_during, the long request $slow_code after $slow_secs s, exit $rc2 about $drain_ms ms after SIGTERM"
[ "$ready_during" = 503 ] && pass "phase 3: /readyz answers 503 while draining" \
    || fail "phase 3: GET /readyz while draining (in-flight request, 50 ms after SIGTERM): expected 503, got $ready_during$( [ "$ready_during" = 000 ] && echo ' (connection refused: the listening socket closed at SIGTERM)')"
[ "$slow_code" = 200 ] && pass "phase 3: the in-flight request finished with 200 during the drain" \
    || fail "phase 3: the in-flight request got $slow_code"
[ "$rc2" = 0 ] && pass "phase 3: exit code 0 after the drain" || fail "phase 3: exit code $rc2 after the drain"
finish
