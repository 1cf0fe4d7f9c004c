# report.sh - PASS/FAIL counting for the shell tests (sourced by
# tests/container, tests/scaleout and tests/soak): pass/fail/info print one
# line each, finish prints "N passed, N failed" and exits 1 on any failure.
passed=0 failed=0
pass() { passed=$((passed + 1)); printf 'PASS %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
info() { printf '     %s\n' "$*"; }
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}
