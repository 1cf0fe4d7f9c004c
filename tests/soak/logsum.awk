# logsum.awk - reads the daemon's stderr (text log format) through a FIFO
# while a load runs, so a long run does not write millions of access lines:
#
#   awk -v counts=FILE -f tests/soak/logsum.awk < FIFO > server.log
#
# Writes to stdout (the kept log) every line except access lines answered 200
# and flushes each, so a caller can wait for "listening on" in it. Counts
# /attend answers per phase and status (with the error_type when there is
# one) and writes them to FILE when the daemon closes its stderr:
#
#   PHASE STATUS[:ERROR_TYPE] COUNT
#
# Phases: "start" until the first marker; a request for a path containing
# "__mark_NAME" (the scripts GET /v1/models/__mark_NAME, a 404) starts phase
# NAME; the line "received SIGTERM" starts phase "<current>+sigterm". Access
# lines are written when a request completes, so a request belongs to the
# phase in which its answer went out.
BEGIN { phase = "start"; printf "" > counts }

/ access / {
    # TS access ID REMOTE "METHOD PATH" STATUS [ERROR_TYPE] in=...
    path = $6; sub(/"$/, "", path)
    status = $7
    if (path ~ /__mark_/) {
        phase = path; sub(/.*__mark_/, "", phase)
        print; fflush()
        next
    }
    if (path == "/attend") {
        key = status
        if ($8 !~ /^in=/) key = key ":" $8
        n[phase " " key]++
    }
    if (status != 200) { print; fflush() }
    next
}

/received SIGTERM/ { phase = phase "+sigterm" }

{ print; fflush() }

END {
    for (k in n) print k, n[k] > counts
    close(counts)
}
