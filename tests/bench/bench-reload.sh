#!/usr/bin/env bash
# Reload benchmark (`make bench-reload`): the model lifecycle's targets at
# the issue's scale, run by test_reload's bench mode (ATTN_RELOAD_BENCH=1):
# a layer of E = 1024 (16 heads, 32 MiB in memory, a 16 MiB file) in a model
# directory, swapped the way docs/OPERATIONS.md says (a temporary file
# renamed over it, then SIGHUP).
#   1. five reloads on an idle server: the time from SIGHUP to the new
#      version serving (read from the repository index), and the daemon's
#      RSS before, at its peak during a reload, and after;
#   2. twenty reloads while 64 connections post /attend and v2 infer back to
#      back: requests that failed (target 0) or held numbers of neither
#      weight set (a mix; target 0), the same times and RSS under that load.
# Targets: SIGHUP to serving < 1 s (idle); 0 failed; 0 mixed; the extra
# memory of a reload about one copy of the layer (reported, not judged).
# The clients run on the same machine: on 2 cores they take CPU from the
# server, so the times under load say more about the machine than the reload.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${ATTN_SERVER_BIN:-$root/bin/attention-server}
TEST=${ATTN_RELOAD_TEST:-$root/build/release/tests/test_reload}
cd "$root"
echo "reload benchmark: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
ATTN_RELOAD_BENCH=1 ATTN_SERVER_BIN="$BIN" "$TEST"
