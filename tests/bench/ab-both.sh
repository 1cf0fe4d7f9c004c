#!/usr/bin/env bash
# ab-both.sh DIR [n E H [threads [weights [seconds]]]]: the engine at BASE
# against the working tree's (make bench-ab), run both ways round:
# DIR/ab_engine (BASE in the first slot) and DIR/swapped/ab_engine (the
# working tree there), in turns of a quarter of the seconds each, twice.
#
# The two slots of one process are not alike: a build compared with itself
# ran its second slot 2-7% slower in some minutes (2026-12-04), which one
# order alone reads as a change. Both print base / work (the median of the
# pairs' ratios, above 1 when the working tree is faster); the slots'
# difference enters the two orders' ratios in opposite directions, so
#   speed-up = sqrt(r1 * r2)     (the working tree against BASE)
#   slots    = sqrt(r2 / r1)     (the second slot's time over the first's)
# for each turn of both orders, and the last line gives them (and the
# speed-ups' mean). With AB_PHASES=1 (ab_engine.c) each turn also gives
# each phase's speed-up, the same way.
set -eu
dir=$1
shift
n=${1:-512} E=${2:-768} H=${3:-12} threads=${4:-$(nproc)} weights=${5:-0} secs=${6:-10}
quarter=$(awk -v s="$secs" 'BEGIN { printf "%.3f", s / 4 }')
ratio() { sed -n "s/^base \/ work, median of the pairs' ratios: \([0-9.]*\).*/\1/p"; }
# AB_PHASES=1: each phase's ratios, "name ratio" a line
phases() { sed -n 's/^phases, base \/ work, [^:]*: //p' | tr ',' '\n' | sed 's/^ *//'; }
speed=() slots=() bits=same
# what ran, for the record: the CPU, its widest vectors, and the settings
# that choose the engine's paths (a figure copied without them is not
# comparable with another CPU's)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
mod=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
vec=AVX2
grep -qw avx512f /proc/cpuinfo 2>/dev/null && vec=AVX-512
grep -qw avx2 /proc/cpuinfo 2>/dev/null || vec="no AVX2"
echo "CPU: ${cpu:-unknown} (family ${fam:-?}, model ${mod:-?}), $(nproc) CPUs, $vec;" \
    "ATTN_ISA=${ATTN_ISA:-default} ATTN_GEMM=${ATTN_GEMM:-default} AB_CAUSAL=${AB_CAUSAL:-0}" \
    "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for turn in 1 2; do
    one=$("$dir/ab_engine" "$n" "$E" "$H" "$threads" "$weights" "$quarter")
    two=$("$dir/swapped/ab_engine" "$n" "$E" "$H" "$threads" "$weights" "$quarter")
    echo "turn $turn, BASE in the first slot:"
    echo "$one"
    echo "turn $turn, the working tree in the first slot:"
    echo "$two"
    r1=$(ratio <<<"$one") r2=$(ratio <<<"$two")
    [ -n "$r1" ] && [ -n "$r2" ] || { echo "ab-both.sh: no ratio in the output" >&2; exit 1; }
    grep -Eq '^outputs( and weights)?: the same bits' <<<"$one" &&
        grep -Eq '^outputs( and weights)?: the same bits' <<<"$two" ||
        bits=different
    if [ -n "$(phases <<<"$one")" ]; then
        # each phase's speed-up over both orders, as the pass's below
        echo "turn $turn, each phase's speed-up over BASE, both orders:" $(paste -d'|' \
            <(phases <<<"$one") <(phases <<<"$two") | awk -F'|' '{
                n = split($1, a, " "); split($2, b, " "); name = a[1]
                for (i = 2; i < n; i++) name = name " " a[i]
                printf "%s %.3f; ", name, sqrt(a[n] * b[n]) }')
    fi
    speed+=("$(awk -v a="$r1" -v b="$r2" 'BEGIN { printf "%.3f", sqrt(a * b) }')")
    slots+=("$(awk -v a="$r1" -v b="$r2" 'BEGIN { printf "%.3f", sqrt(b / a) }')")
done
echo "both orders: the working tree's speed-up over BASE ${speed[*]} (mean $(awk -v a="${speed[0]}" \
    -v b="${speed[1]}" 'BEGIN { printf "%.3f", (a + b) / 2 }')); the second slot's time over" \
    "the first's ${slots[*]}; outputs: $bits bits"
