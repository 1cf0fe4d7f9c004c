#!/usr/bin/env python3
"""Read the access log nginx wrote during one phase of test-scaleout.sh and
say what happened around an event (a replica killed or told to drain).

  nginx_log.py LOG EVENT_EPOCH TARGET_ADDR

LOG lines: $msec|$request_time|$status|$upstream_addr|$upstream_status
($msec is when the request ended; with retries, $upstream_addr and
$upstream_status list every attempt, comma-separated).

Prints a few report lines, then one last line of shell assignments:
  total= errors5xx= touched= touched_failed= late_touched= served_after= failover_ms= spike_ms= p50_ms=
touched: requests after the event that tried TARGET at least once;
touched_failed: of those, attempts on TARGET that failed (retried elsewhere);
late_touched: requests that tried TARGET more than 1 s after the event;
served_after: requests TARGET answered with 2xx after the event (in-flight
ones finishing during a drain);
errors5xx: answers nginx gave with a 5xx status (4xx are the test's own bad
request, and 499 the requests wrk abandons when its run ends);
failover_ms: from the event to the end of the last request that tried TARGET
(after it, every request went to the survivors only); 0 when none did;
spike_ms: the longest request that ended within 2 s after the event;
p50_ms: median request time before the event.
"""
import sys


def main():
    path, event, target = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) < 5:
                continue
            end, rt = float(parts[0]), float(parts[1])
            addrs = [a.strip() for a in parts[3].replace(" : ", ",").split(",")]
            stats = [s.strip() for s in parts[4].replace(" : ", ",").split(",")]
            rows.append((end, rt, int(parts[2]), addrs, stats))
    total = len(rows)
    errors5xx = sum(1 for r in rows if r[2] >= 500)
    before = sorted(r[1] for r in rows if r[0] < event)
    p50 = before[len(before) // 2] * 1000 if before else 0.0

    touched = touched_failed = late = served_after = 0
    last_touch = None
    per_addr_after = {}
    for end, rt, status, addrs, stats in rows:
        if end < event:
            continue
        final = addrs[-1] if addrs else "-"
        per_addr_after[final] = per_addr_after.get(final, 0) + 1
        hits = [i for i, a in enumerate(addrs) if a == target]
        if not hits:
            continue
        touched += 1
        for i in hits:
            s = stats[i] if i < len(stats) else "-"
            if i == len(addrs) - 1 and s.isdigit() and 200 <= int(s) < 300:
                served_after += 1
            elif i < len(addrs) - 1 or not (s.isdigit() and 200 <= int(s) < 300):
                touched_failed += 1
        if end - rt > event + 1.0:
            late += 1
        last_touch = end if last_touch is None else max(last_touch, end)
    failover_ms = (last_touch - event) * 1000 if last_touch is not None else 0.0
    spike = max((r[1] for r in rows if event <= r[0] <= event + 2.0), default=0.0) * 1000

    print("     nginx log: %d requests, %d answered 5xx; after the event, final upstreams: %s" % (
        total, errors5xx, ", ".join("%s=%d" % kv for kv in sorted(per_addr_after.items()))))
    print("     after the event: %d requests tried %s (%d attempts failed there and were retried, "
          "%d answered by it), %d more than 1 s after" % (touched, target, touched_failed, served_after, late))
    print("total=%d errors5xx=%d touched=%d touched_failed=%d late_touched=%d served_after=%d "
          "failover_ms=%.0f spike_ms=%.0f p50_ms=%.1f" % (
              total, errors5xx, touched, touched_failed, late, served_after, failover_ms, spike, p50))


if __name__ == "__main__":
    main()
