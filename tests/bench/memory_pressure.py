#!/usr/bin/python3
"""memory_pressure.py - the memory budget against the clients of its issue.

    tests/bench/memory_pressure.py BIN WEIGHTS [BUDGET_MIB]     (make bench-memory)

Starts the daemon on WEIGHTS (an E=768, 12-head layer: build/load/large.
safetensors) with --max-memory-bytes BUDGET_MIB (default 512) and, in turn:

  readers   40 clients each send a 512-token /attend request for per-head
            weights as float JSON (a 45 MB answer) and read nothing;
  uploads   100 clients each announce a 64 MiB body and send 12 MiB of it;
  both      the two together.

While they hang on (10 s): the daemon's peak RSS (/proc, every 50 ms), the
bytes held against the budget (/metrics), /healthz latency, and what a good
client's small request gets. After they leave: the bytes held (must return
to 0) and a large request's status. The same scenarios with no budget at
all (--max-memory-bytes of 1 TiB) run first for the comparison. Prints one
table and "RESULT name value" lines.
"""

import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

N, E = 512, 768


def start(binary, weights, budget):
    p = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", "--model",
                          "large=" + weights, "--max-memory-bytes", str(budget),
                          "--body-timeout-ms", "120000", "--connection-timeout-s", "120",
                          "--max-connections", "1024"],
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"listening on [^ ]*:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, int(m.group(1))
    raise SystemExit("the daemon did not start")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    m = re.search(r"^%s (\S+)$" % re.escape(name), body, re.M)
    return float(m.group(1)) if m else -1


def request_bytes():
    rnd = random.Random(3)
    rows = [[round(rnd.uniform(-1, 1), 3) for _ in range(E)] for _ in range(N)]
    body = json.dumps({"embeddings": rows}).encode()
    head = ("POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % len(body)).encode()
    return head + body


def small_socket(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    return s


def readers(port, req, n=40):
    socks = []
    for _ in range(n):
        s = small_socket(port)
        s.sendall(req)
        socks.append(s)
    return socks


def uploads(port, n=100):
    socks, chunk = [], b" " * (1 << 20)
    for _ in range(n):
        s = small_socket(port)
        s.sendall(b"POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (64 << 20))
        s.setblocking(False)
        sent = 0
        t0 = time.time()
        while sent < (12 << 20) and time.time() - t0 < 2:
            try:
                sent += s.send(chunk[:min(len(chunk), (12 << 20) - sent)])
            except BlockingIOError:
                time.sleep(0.001)
            except OSError:
                break
        socks.append(s)
    return socks


def watch(proc, port, seconds=10):
    peak_rss = peak_held = worst_live = 0.0
    t_end = time.time() + seconds
    while time.time() < t_end:
        peak_rss = max(peak_rss, rss_mib(proc.pid))
        peak_held = max(peak_held, metric(port, "attention_server_memory_held_bytes") / 1048576)
        t0 = time.time()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz")
        c.getresponse().read()
        c.close()
        worst_live = max(worst_live, time.time() - t0)
        time.sleep(0.05)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/attend", body=json.dumps({"embeddings": [[0.1] * E] * 4}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    good = "%d%s" % (r.status, " Retry-After" if r.getheader("Retry-After") else "")
    c.close()
    return peak_rss, peak_held, worst_live, good


def after(port, req):
    held = -1
    for _ in range(100):
        held = metric(port, "attention_server_memory_held_bytes")
        if held == 0:
            break
        time.sleep(0.1)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/attend", body=req[req.index(b"\r\n\r\n") + 4:],
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return held, r.status


def main():
    binary, weights = sys.argv[1], sys.argv[2]
    budget_mib = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    req = request_bytes()
    print("| budget | scenario | peak RSS MiB | peak held MiB | worst /healthz s | good client | held after | large request after |")
    print("|---|---|---:|---:|---:|---|---:|---:|")
    runs = [("none (1 TiB)", 1 << 40), ("%d MiB" % budget_mib, budget_mib << 20)]
    if os.environ.get("BUDGET_ONLY"):
        runs = runs[1:]
    for label, budget in runs:
        proc, port = start(binary, weights, budget)
        base = rss_mib(proc.pid)
        for name in ("readers", "uploads", "both"):
            socks = []
            if name in ("readers", "both"):
                socks += readers(port, req)
            if name in ("uploads", "both"):
                socks += uploads(port)
            rss, held, live, good = watch(proc, port)
            for s in socks:
                s.close()
            held_after, status = after(port, req)
            print("| %s | %s | %.0f | %.0f | %.3f | %s | %.0f | %d |" % (
                label, name, rss, held, live, good, held_after, status))
            print("RESULT %s:%s peak_rss_mib %.0f base_rss_mib %.0f" % (label, name, rss, base),
                  file=sys.stderr)
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
