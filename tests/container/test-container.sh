#!/usr/bin/env bash
# The container image, end to end, on podman (what `make test-container` runs):
#
#   build it (docker/build-image.sh; SKIP_BUILD=1 reuses $IMAGE), check its
#   configuration (user, healthcheck, stop signal, no curl or compilers), run it
#   with a read-only root filesystem and no tmpfs at all, published on a free
#   loopback port; wait until healthy; /readyz 200; POST /attend on the demo
#   set, the numbers checked against PyTorch and against the host binary run
#   outside the container on the same input; the process is PID 1 and not
#   root; the root filesystem refuses writes even from root; a weight set
#   mounted at /weights loads; `podman stop` ends it within 10 s with exit
#   code 0; the image size is reported.
#
# Prints one line per check and "N passed, N failed" last; exit 1 on failure.
# Traffic goes to 127.0.0.1 only.
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/docker/containers.conf}
IMAGE=${IMAGE:-attention-server:latest}
HOST_BIN=${ATTN_SERVER_BIN:-$root/bin/attention-server}
DEMO=$root/config/weights/demo.safetensors
PY=/usr/bin/python3
MAX_IMAGE_MB=${MAX_IMAGE_MB:-250}

. "$root/tests/report.sh"

tmp=$(mktemp -d /tmp/attn-container-test.XXXXXX)
name=attn-test-$$
name2=attn-test-weights-$$
name3=attn-test-memory-$$
host_pid=
cleanup() {
    podman rm -f -i -t 0 "$name" "$name2" "$name3" >/dev/null 2>&1
    [ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# A free TCP port on 127.0.0.1 (the kernel's pick; released before use).
free_port() {
    $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# http_code URL: the status of a GET, 000 when nothing answers.
http_code() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$1"; }

# wait_code URL CODE SECONDS: poll until URL answers CODE; 0 if it did.
wait_code() {
    local deadline=$((SECONDS + $3))
    while [ $SECONDS -lt $deadline ]; do
        [ "$(http_code "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    return 1
}

command -v podman >/dev/null || { fail "podman installed (apt-get install -y podman runc debootstrap)"; finish; }

# ------------------------------------------------------------------ build
if [ -z "${SKIP_BUILD:-}" ]; then
    start=$SECONDS
    if CONTAINER_ENGINE=podman "$root/docker/build-image.sh" "$IMAGE" >"$tmp/build.log" 2>&1; then
        pass "image $IMAGE built ($((SECONDS - start)) s)"
    else
        fail "image build"; tail -n 40 "$tmp/build.log" | sed 's/^/     /'; finish
    fi
fi
podman image exists "$IMAGE" || { fail "image $IMAGE exists"; finish; }

# ----------------------------------------------------------- image config
podman image inspect "$IMAGE" >"$tmp/image.json"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
size_mb=$((size / 1000000))
if [ "$size_mb" -le "$MAX_IMAGE_MB" ]; then
    pass "image size ${size_mb} MB (limit ${MAX_IMAGE_MB} MB)"
else
    fail "image size ${size_mb} MB, over ${MAX_IMAGE_MB} MB"
fi
# Docker-format config as podman reports it: User, StopSignal, Healthcheck, ...
if $PY - "$tmp/image.json" <<'EOF'; then pass "image config: uid 10001, exec-form entrypoint, HEALTHCHECK --healthcheck, STOPSIGNAL SIGTERM, port 8080"; else fail "image config (above)"; fi
import json, sys
img = json.load(open(sys.argv[1]))[0]
cfg = img.get("Config") or {}
hc = img.get("Healthcheck") or img.get("HealthCheck") or cfg.get("Healthcheck") or {}
problems = []
if cfg.get("User") not in ("10001", "10001:10001"):
    problems.append("User is %r" % cfg.get("User"))
if cfg.get("Entrypoint") != ["/usr/local/bin/attention-server"]:
    problems.append("Entrypoint is %r" % cfg.get("Entrypoint"))
test = hc.get("Test") or []
if "--healthcheck" not in test:
    problems.append("HEALTHCHECK is %r" % test)
if (cfg.get("StopSignal") or "SIGTERM") not in ("SIGTERM", "15"):
    problems.append("StopSignal is %r" % cfg.get("StopSignal"))
if "8080/tcp" not in (cfg.get("ExposedPorts") or {}):
    problems.append("ExposedPorts is %r" % cfg.get("ExposedPorts"))
for p in problems:
    print("     " + p)
sys.exit(1 if problems else 0)
EOF
tools=$(podman run --rm --network=none --entrypoint /bin/sh "$IMAGE" -c \
    'for c in curl wget gcc cc make; do command -v $c; done; true' 2>/dev/null)
if [ -z "$tools" ]; then pass "no curl, wget, compiler or make in the image"; else fail "image carries: $tools"; fi

# -------------------------------------------------------------------- run
port=$(free_port)
# --read-only-tmpfs=false: not even /tmp, /run or /var/tmp are writable.
if podman run -d --name "$name" --read-only --read-only-tmpfs=false \
        -p "127.0.0.1:$port:8080" "$IMAGE" >"$tmp/run.out" 2>"$tmp/run.err"; then
    pass "container started read-only on 127.0.0.1:$port"
else
    fail "podman run"; sed 's/^/     /' "$tmp/run.err"; finish
fi

# Healthy: the image's own HEALTHCHECK, run on demand (no systemd timers here).
start=$SECONDS healthy=0
while [ $((SECONDS - start)) -lt 60 ]; do
    if podman healthcheck run "$name" >/dev/null 2>&1; then healthy=1; break; fi
    [ "$(podman inspect --format '{{.State.Running}}' "$name" 2>/dev/null)" = true ] || break
    sleep 0.5
done
if [ $healthy = 1 ]; then
    pass "healthy (HEALTHCHECK --healthcheck /healthz) after $((SECONDS - start)) s"
else
    fail "not healthy within 60 s; container log:"; podman logs "$name" 2>&1 | tail -n 30 | sed 's/^/     /'
    finish
fi

base=http://127.0.0.1:$port
if wait_code "$base/readyz" 200 30; then pass "GET /readyz 200 through the published port"; else fail "GET /readyz: $(http_code "$base/readyz")"; fi

# ---------------------------------------------------------------- /attend
$PY "$root/tests/container/attend_check.py" request "$tmp/req.json"
code=$(curl -s -m 30 -o "$tmp/got.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$tmp/req.json" "$base/attend")
if [ "$code" = 200 ]; then pass "POST /attend 200"; else fail "POST /attend: $code $(head -c 300 "$tmp/got.json")"; fi

# The same request to the host binary, run outside the container.
against=()
if [ -x "$HOST_BIN" ]; then
    hport=$(free_port)
    "$HOST_BIN" --host 127.0.0.1 --port "$hport" --model "demo=$DEMO" --threads 1 >"$tmp/host.log" 2>&1 &
    host_pid=$!
    if wait_code "http://127.0.0.1:$hport/readyz" 200 30 &&
        [ "$(curl -s -m 30 -o "$tmp/host.json" -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary @"$tmp/req.json" "http://127.0.0.1:$hport/attend")" = 200 ]; then
        against=(--against "$tmp/host.json" --against-name "host binary")
    else
        info "host binary $HOST_BIN did not answer; comparing with PyTorch only"; tail -n 5 "$tmp/host.log" | sed 's/^/     /'
    fi
    kill "$host_pid" 2>/dev/null; wait "$host_pid" 2>/dev/null; host_pid=
else
    info "no host binary at $HOST_BIN; comparing with PyTorch only"
fi
if [ "$code" = 200 ]; then
    if $PY "$root/tests/container/attend_check.py" compare --request "$tmp/req.json" --weights "$DEMO" \
        "${against[@]}" "$tmp/got.json" >"$tmp/cmp.txt" 2>&1; then
        pass "/attend numbers match"; sed 's/^/     /' "$tmp/cmp.txt"
    else
        fail "/attend numbers"; sed 's/^/     /' "$tmp/cmp.txt"
    fi
fi

# ------------------------------------------------------------ who and how
pid=$(podman inspect --format '{{.State.Pid}}' "$name")
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$pid/status" 2>/dev/null)
if [ "$uids" = "10001 10001 10001 10001" ]; then
    pass "daemon runs as uid 10001 (host pid $pid; real, effective, saved, fs)"
else
    fail "daemon uids: '$uids' (want 10001 x4)"
fi
comm=$(podman exec "$name" cat /proc/1/comm 2>&1)
if [ "$comm" = attention-serve ] || [ "$comm" = attention-server ]; then
    pass "the daemon is PID 1 in the container"
else
    fail "PID 1 in the container is '$comm'"
fi

ro=$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$name")
err_root=$(podman exec --user 0 "$name" touch /probe 2>&1)
err_tmp=$(podman exec --user 0 "$name" touch /tmp/probe 2>&1)
if [ "$ro" = true ] && [[ $err_root == *"Read-only file system"* ]] && [[ $err_tmp == *"Read-only file system"* ]]; then
    pass "root filesystem read-only (even root cannot write /, /tmp), and the daemon needs no writable path"
else
    fail "read-only root: ReadonlyRootfs=$ro; touch /: '$err_root'; touch /tmp: '$err_tmp'"
fi

# ---------------------------------------------------- weights at /weights
port2=$(free_port)
wdir=$tmp/weights
mkdir -p "$wdir" && cp "$DEMO" "$wdir/mine.safetensors" && chmod -R a+rX "$wdir"
if podman run -d --name "$name2" --read-only --read-only-tmpfs=false -p "127.0.0.1:$port2:8080" \
        -v "$wdir:/weights:ro" -e ATTN_MODELS=mine=/weights/mine.safetensors "$IMAGE" >/dev/null 2>"$tmp/run2.err" &&
    wait_code "http://127.0.0.1:$port2/readyz" 200 30 &&
    [ "$(http_code "http://127.0.0.1:$port2/v1/models/mine")" = 200 ]; then
    pass "a weight set mounted read-only at /weights is served (ATTN_MODELS=mine=/weights/...)"
else
    fail "weights at /weights: /v1/models/mine $(http_code "http://127.0.0.1:$port2/v1/models/mine")"
    podman logs "$name2" 2>&1 | tail -n 10 | sed 's/^/     /'
fi
podman rm -f -t 0 "$name2" >/dev/null 2>&1

# ------------------------------------------ under a container memory limit
# The budget comes from the container's limit (cgroup), and slow readers and
# stalled uploads cannot get the process killed for memory.
port3=$(free_port)
if podman run -d --name "$name3" --memory 768m --memory-swap 768m --read-only \
        --read-only-tmpfs=false -p "127.0.0.1:$port3:8080" "$IMAGE" >/dev/null 2>"$tmp/run3.err"; then
    if wait_code "http://127.0.0.1:$port3/readyz" 200 30; then
        budget=$(podman logs "$name3" 2>&1 | grep -m1 'memory budget for requests' | sed 's/.*requests: //')
        if grep -q cgroup <<<"$budget"; then pass "memory budget from the container's limit: $budget"
        else fail "memory budget not from the cgroup limit: '$budget'"; fi
        if out=$($PY "$root/tests/container/memory_clients.py" "$port3"); then
            pass "12 slow readers of ~50 MB answers and 8 stalled 64 MiB uploads under --memory 768m: slowest /healthz $(cut -d' ' -f1 <<<"$out") s, a request after them $(cut -d' ' -f2 <<<"$out")"
        else
            fail "under --memory 768m: slowest /healthz and status after: '$out'"
        fi
        oom=$(podman inspect --format '{{.State.OOMKilled}} {{.State.Running}}' "$name3")
        if [ "$oom" = "false true" ]; then pass "not OOM-killed, still running"; else fail "OOMKilled/Running: $oom"; fi
    else
        fail "the memory-limited container did not become ready"; podman logs "$name3" 2>&1 | tail -n 10 | sed 's/^/     /'
    fi
elif grep -qiE 'cgroup|memory|controller' "$tmp/run3.err"; then
    info "skipped the memory-limit run: this engine cannot limit memory here ($(head -c 200 "$tmp/run3.err"))"
else
    fail "podman run --memory 768m"; sed 's/^/     /' "$tmp/run3.err"
fi
podman rm -f -t 0 "$name3" >/dev/null 2>&1

# ------------------------------------------------------------------- stop
t0=$(date +%s.%N)
podman stop -t 10 "$name" >/dev/null 2>"$tmp/stop.err"
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
rc=$(podman inspect --format '{{.State.ExitCode}}' "$name")
if awk -v s="$secs" 'BEGIN { exit !(s < 10) }' && [ "$rc" = 0 ]; then
    pass "podman stop (SIGTERM): exited in $secs s with code 0"
else
    fail "podman stop: $secs s, exit code $rc"; podman logs "$name" 2>&1 | tail -n 10 | sed 's/^/     /'
fi
if podman logs "$name" >"$tmp/container.log" 2>&1; then
    info "container log, last lines:"; tail -n 4 "$tmp/container.log" | cut -c1-200 | sed 's/^/       /'
fi

info "image $IMAGE: $size_mb MB ($(podman image inspect --format '{{.Id}}' "$IMAGE" | cut -c1-12))"
finish
