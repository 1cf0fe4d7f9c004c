#!/usr/bin/env bash
# ab-build.sh OUT BASE_LIB BASE_CORE WORK_LIB WORK_CORE: link two builds of
# the engine into one binary, OUT/ab_engine (make bench-ab), and again with
# their slots swapped, OUT/swapped/ab_engine (ab_engine.c, AB_SWAPPED;
# ab-both.sh runs the two). Each copy is
# tests/bench/ab_shim.c compiled against its tree's core/ headers and
# linked with its tree's libattn.a into one relocatable object, in which
# every symbol but the shim's ab_base_* or ab_work_* entry points is then
# made local: the two copies' attn_forward, pools and kernel choices
# never meet.
set -eu
out=$1 base_lib=$2 base_core=$3 work_lib=$4 work_core=$5
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CC=${CC:-cc}
flags=(-O2 -g -std=c11 -D_GNU_SOURCE -pthread)
one() { # dir name lib core [-DAB_BASE]
    local dir=$1 name=$2 lib=$3 core=$4
    shift 4
    "$CC" "${flags[@]}" "$@" -I"$core" -c "$here/ab_shim.c" -o "$dir/shim_$name.o"
    ld -r -o "$dir/engine_$name.o" "$dir/shim_$name.o" --whole-archive "$lib" --no-whole-archive
    # and without COMDAT groups (the resolvers of the engine's target_clones
    # functions are in some): the linker would keep one copy's group and
    # drop the other's, whose references then point nowhere
    objcopy -G "ab_${name}_setup" -G "ab_${name}_pass" -G "ab_${name}_phases" -G "ab_${name}_output" \
        -G "ab_${name}_free" -R .group "$dir/engine_$name.o"
}
mkdir -p "$out/swapped"
one "$out" base "$base_lib" "$base_core" -DAB_BASE
one "$out" work "$work_lib" "$work_core"
"$CC" "${flags[@]}" "$here/ab_engine.c" "$out/engine_base.o" "$out/engine_work.o" \
    -lopenblas -lm -o "$out/ab_engine"
# the working tree in the first slot (whose functions are ab_base_*)
one "$out/swapped" base "$work_lib" "$work_core" -DAB_BASE
one "$out/swapped" work "$base_lib" "$base_core"
"$CC" "${flags[@]}" -DAB_SWAPPED "$here/ab_engine.c" "$out/swapped/engine_base.o" \
    "$out/swapped/engine_work.o" -lopenblas -lm -o "$out/swapped/ab_engine"
