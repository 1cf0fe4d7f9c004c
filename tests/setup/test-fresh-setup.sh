#!/usr/bin/env bash
# Prove the README's two commands on a clean Debian 12 root file system:
# a debootstrap'd bookworm (docker/build-base-image.sh) run as a container,
# given only what the README assumes (git, make, a C compiler), a fresh clone
# of this repository, then `make run` (the daemon must answer /healthz and a
# POST /attend) and `make test` (must pass). Everything else the project
# needs, it must install itself.
#
#   tests/setup/test-fresh-setup.sh            (make test-setup)
#
# The container uses the host network (loopback only: the daemon listens on
# 127.0.0.1) and reaches the Debian mirror apt already uses.
#
# Downloaded packages are kept between runs in ATTN_APT_CACHE (default
# ~/.cache/attention-server/apt-archives, mounted as the root's
# /var/cache/apt/archives; the image's rule that deletes them after each
# install is dropped for this): the root is still fresh, `apt-get update`
# still fetches the indexes, and apt checks every cached .deb against them,
# so only the download is saved. ATTN_APT_CACHE=none downloads everything.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/docker/containers.conf}
pass=0 fail=0
ok() { echo "PASS $*"; pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

"$root/docker/build-base-image.sh" >/dev/null || { echo "cannot build the base image"; echo "0 passed, 1 failed"; exit 1; }

work=$(mktemp -d /tmp/attn-fresh-XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/src" || { echo "git clone failed"; exit 1; }
# the working tree's uncommitted state is not what a user clones: test HEAD
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

cat >"$work/inside.sh" <<INSIDE
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
[ -d /var/cache/apt/archives/partial ] && rm -f /etc/apt/apt.conf.d/docker-clean
t0=\$(date +%s)
apt-get update -qq && apt-get install -y -qq git make gcc >/dev/null || exit 10
echo "git, make and gcc installed (\$(( \$(date +%s) - t0 )) s)"
git clone -q /src /home/project && cd /home/project || exit 11
echo "--- make run"
t0=\$(date +%s)
# in a session of its own, so the daemon and make stop together afterwards
ATTN_PORT=$port ATTN_HOST=127.0.0.1 setsid make run >/tmp/run.log 2>&1 &
run=\$!
for i in \$(seq 600); do
  grep -q "listening on" /tmp/run.log 2>/dev/null && break; sleep 1
done
grep "listening on" /tmp/run.log || { tail -30 /tmp/run.log; exit 12; }
# the image has no curl until make test installs it: talk HTTP with bash
exec 3<>/dev/tcp/127.0.0.1/$port; printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3; h=\$(cat <&3); exec 3>&-
# match in the shell, not with echo | head | grep: under pipefail, bash's
# line-buffered echo can take SIGPIPE once head has its line, and fail the test
status_ok() { [[ \${1%%\$'\r'*} == *" 200 "* ]]; }
status_ok "\$h" || { echo "healthz: \$h"; exit 13; }
body='{"embeddings":[[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0.1,0.2,0.3,0.4]]}'
exec 3<>/dev/tcp/127.0.0.1/$port
printf 'POST /attend HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' "\${#body}" "\$body" >&3
a=\$(cat <&3); exec 3>&-
status_ok "\$a" && [[ \$a == *'"attention_weights"'* ]] || { echo "attend: \$a"; exit 14; }
echo "make run serves: /healthz 200, POST /attend 200 with attention weights (\$(( \$(date +%s) - t0 )) s from make run)"
kill -- -\$run; wait \$run 2>/dev/null
echo "--- make test"
t0=\$(date +%s)
make test >/tmp/test.log 2>&1
rc=\$?
tail -25 /tmp/test.log
echo "make test: exit \$rc after \$(( \$(date +%s) - t0 )) s, of which the tests \$(awk '/^(PASS|FAIL) / {s += \$3} END {printf "%.0f", s}' /tmp/test.log) s"
exit \$rc
INSIDE

# make test fetches the OpenAPI validator from the npm registry over TLS:
# the fresh root trusts what this machine trusts (a site's TLS-inspecting
# proxy has its CA in the host's bundle, not in Debian's).
ca=()
[ -f /etc/ssl/certs/ca-certificates.crt ] &&
  ca=(-v /etc/ssl/certs/ca-certificates.crt:/etc/host-ca.crt:ro -e NODE_EXTRA_CA_CERTS=/etc/host-ca.crt)

cache=()
apt_cache=${ATTN_APT_CACHE:-$HOME/.cache/attention-server/apt-archives}
if [ "$apt_cache" != none ] && mkdir -p "$apt_cache/partial"; then
  cache=(-v "$apt_cache:/var/cache/apt/archives")
fi

t0=$(date +%s)
podman run --rm --network=host -v "$work/src:/src:ro" -v "$work/inside.sh:/inside.sh:ro" "${ca[@]}" "${cache[@]}" \
    debian:bookworm bash /inside.sh 2>&1 | tee "$work/out.log" | sed 's/^/    /'
rc=${PIPESTATUS[0]}
secs=$(( $(date +%s) - t0 ))
case $rc in
  0)  ok "make run and make test work on a fresh Debian 12 root (${secs}s)";;
  10) bad "could not install git, make and gcc in the fresh root";;
  12|13|14) bad "make run did not serve (exit $rc)";;
  *)  if grep -q "make run serves" "$work/out.log"; then ok "make run serves on a fresh root"; fi
      bad "make test failed on a fresh root (exit $rc, ${secs}s)";;
esac
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
