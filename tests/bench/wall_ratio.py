#!/usr/bin/python3
"""wall_ratio.py - what one large request costs a client, against compute.

    tests/bench/wall_ratio.py URL [MODEL] [ROUNDS] [MINIMAL_URL [MINIMAL_PID]]
                                                     (bench-http.sh runs it)

One request at a time (no concurrency): n=512 tokens of E=768 on the weight
set MODEL (default "large", 12 heads) with per-head attention weights, sent
by curl (a real client; it decompresses gzip itself) the ways a user would:

  v2-binary       POST /v2/models/MODEL/infer, binary tensors in and out
  v2-noweights    the same asking for `output` only (no attention weights):
                  its end-to-end GFLOPS are printed for the FMA peak (RATE)
  attend-base64   POST /attend, encoding_format base64
  attend-float    POST /attend, float JSON
  attend-float-gz the same with Accept-Encoding: gzip (curl --compressed)

Rounds alternate the four (ROUNDS, default 7). Per request: curl's
time_total (the client's wall time, connection to last byte) and the
compute time from the answer's Server-Timing header. Prints per way the
median wall time, the median compute time, and the median of each request's
wall / compute; then gzip / plain as the ratio of the medians of wall time.

With MINIMAL_URL (bench_minimal_mhd, which answers ?bytes=N with N bytes),
each way's transfer floor follows, in the same rounds: curl sends the same
body to the minimal server and reads as many bytes as our answer had. No
server can answer in less than compute plus that floor without overlapping
the two, and on a 2-core machine whose client shares the cores both are
CPU-bound; (floor + compute) / compute is printed as the bound.
In every round beside those, a turn of the v2 request without weights as
an inference client sends it: one request at a time on one kept-alive
connection (Python's http.client), with its own floor (KeepAlive below)
and where its wall time goes: the server's phases from its Server-Timing
header (receive, decode, queue, compute, encode), and the rest.
curl's time_total counts a new connection and curl's own handling of a
1.5 MB body each time, which takes 3-4 ms against about 1 ms kept alive.
With MINIMAL_PID (the minimal server's process), that floor's CPU time is
measured too, client and server threads together: overlapping the
transfer with compute could hide its wall time but not its CPU time, which
comes out of the same cores the pool computes on, so compute + that CPU
time / the cores is printed as the bound for a server that overlaps
(OVERLAP, as a multiple of compute).
The last lines are machine-readable "RATIO name value" (and "FLOOR name
ms", "BOUND name value", "OVERLAP name value", "RATE way
GFLOPS-end-to-end GFLOPS-compute").
"""

import http.client
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

N, E = 512, 768
KA_BATCH = 10  # requests a turn on a kept-alive connection


def timing_parts(server_timing):
    """A Server-Timing header's value as {name: ms}."""
    out = {}
    for p in server_timing.split(","):
        name, _, dur = p.strip().partition(";dur=")
        if dur:
            out[name] = float(dur)
    return out


def compute_s(server_timing):
    """The compute time (s) in a Server-Timing header's value, 0 if none."""
    return timing_parts(server_timing).get("compute", 0.0) / 1e3


def curl_time(body_path, url, extra):
    """curl's time_total (s) to POST body_path to url, or exit on an error."""
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}",
                          "--data-binary", "@" + body_path] + extra + [url],
                         capture_output=True, text=True).stdout.split()
    if not out or out[0] != "200":
        print("%s: HTTP %s" % (url, out[0] if out else "?"))
        sys.exit(1)
    return float(out[1])


def v2_body(weights=True):
    rnd = random.Random(5)
    x = [round(rnd.uniform(-1, 1), 3) for _ in range(N * E)]
    raw = struct.pack("<%df" % (N * E), *x)
    req = {"inputs": [{"name": "embeddings", "shape": [N, E], "datatype": "FP32",
                       "parameters": {"binary_data_size": len(raw)}}],
           "parameters": {"binary_data_output": True}}
    if not weights:
        req["outputs"] = [{"name": "output"}]
    head = json.dumps(req).encode()
    return x, raw, head


def flops(heads_e=E):
    """attn_forward_flops for self-attention of N tokens, E = kdim = vdim."""
    return 2.0 * (N * heads_e * heads_e * 2 + N * heads_e * 2 * heads_e + 2 * N * N * heads_e)


def main():
    url = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else "large"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    minimal = sys.argv[4] if len(sys.argv) > 4 else None
    minimal_pid = sys.argv[5] if len(sys.argv) > 5 else None
    x, raw, head = v2_body()
    tmp = tempfile.mkdtemp()
    files = {}
    files["v2-binary"] = (head + raw, "/v2/models/%s/infer" % model,
                          ["-H", "Content-Type: application/octet-stream",
                           "-H", "Inference-Header-Content-Length: %d" % len(head)])
    _, _, head_nw = v2_body(weights=False)
    files["v2-noweights"] = (head_nw + raw, "/v2/models/%s/infer" % model,
                             ["-H", "Content-Type: application/octet-stream",
                              "-H", "Inference-Header-Content-Length: %d" % len(head_nw)])
    import base64
    b64 = base64.b64encode(raw).decode()
    files["attend-base64"] = (json.dumps({"model": model, "encoding_format": "base64",
                                          "embeddings": {"dtype": "float32", "shape": [N, E],
                                                         "base64": b64}}).encode(),
                              "/attend", ["-H", "Content-Type: application/json"])
    rows = [x[i * E:(i + 1) * E] for i in range(N)]
    fl = json.dumps({"model": model, "embeddings": rows}).encode()
    files["attend-float"] = (fl, "/attend", ["-H", "Content-Type: application/json"])
    files["attend-float-gz"] = (fl, "/attend", ["-H", "Content-Type: application/json",
                                                "--compressed"])
    for k, (body, _, _) in files.items():
        with open(os.path.join(tmp, k), "wb") as f:
            f.write(body)
    res = {k: [] for k in files}
    floors = {k: [] for k in files if k != "attend-float-gz"}
    ka = KeepAlive(url, files["v2-noweights"], minimal, minimal_pid)
    for r in range(rounds + 1):
        if r:
            ka.turn()
        for k, (_, path, extra) in files.items():
            out = subprocess.run(
                ["curl", "-s", "-o", "/dev/null", "-w",
                 "%{http_code} %{time_total} %{size_download} %header{server-timing}\n",
                 "--data-binary", "@" + os.path.join(tmp, k)] + extra + [url + path],
                capture_output=True, text=True).stdout.split("\n")[0]
            parts = out.split(" ", 3)
            if parts[0] != "200":
                print("%s: HTTP %s" % (k, parts[0]))
                sys.exit(1)
            wall = float(parts[1])
            compute = compute_s(parts[3])
            if r:  # round 0 warms up
                res[k].append((wall, compute, int(parts[2])))
            if minimal and k in floors and r:
                floors[k].append(curl_time(os.path.join(tmp, k),
                                           "%s/?bytes=%s" % (minimal, parts[2]), extra))
    print("| way | bytes received | wall ms (median) | compute ms (median) | wall / compute |"
          " transfer floor ms | (floor + compute) / compute |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios, bounds = {}, {}
    for k, v in res.items():
        w = statistics.median(a for a, _, _ in v)
        c = statistics.median(b for _, b, _ in v)
        q = statistics.median(a / b for a, b, _ in v)
        ratios[k] = q
        fl, bd = "", ""
        if floors.get(k):
            f = statistics.median(floors[k])
            bounds[k] = (f, (f + c) / c)
            fl, bd = "%.1f" % (f * 1e3), "%.2f" % ((f + c) / c)
        print("| %s | %d | %.1f | %.1f | %.2f | %s | %s |" % (k, v[-1][2], w * 1e3, c * 1e3, q,
                                                              fl, bd))
    gz = statistics.median(a for a, _, _ in res["attend-float-gz"]) / \
        statistics.median(a for a, _, _ in res["attend-float"])
    print()
    for k, q in ratios.items():
        print("RATIO %s %.3f" % (k, q))
    print("RATIO gzip-over-plain %.3f" % gz)
    for k, (f, b) in bounds.items():
        print("FLOOR %s %.1f" % (k, f * 1e3))
        print("BOUND %s %.3f" % (k, b))
    nw = res["v2-noweights"]
    print("RATE v2-noweights %.1f %.1f" % (flops() / statistics.median(a for a, _, _ in nw) / 1e9,
                                           flops() / statistics.median(b for _, b, _ in nw) / 1e9))
    ka.report()


def cpu_s(pid):
    """CPU seconds the threads of process pid have run, to the nanosecond
    (/proc/PID/task/*/schedstat's first field; "self" for this process)."""
    total = 0
    base = "/proc/%s/task" % pid
    for t in os.listdir(base):
        try:
            with open("%s/%s/schedstat" % (base, t)) as f:
                total += int(f.read().split()[0])
        except OSError:  # a thread that ended meanwhile
            pass
    return total / 1e9


class KeepAlive:
    """The v2 request without weights as an inference client sends it: one
    request at a time on one kept-alive connection (Python's http.client,
    the body in memory), KA_BATCH requests a turn, each turn followed by the
    same on a kept-alive connection to the minimal server (the transfer
    floor: the same body, an answer of as many bytes). A turn runs in every
    round of main's, beside curl's requests, so both see the same minutes
    of a machine whose speed drifts."""

    def __init__(self, url, way, minimal, floor_pid=None):
        body, self.path, extra = way
        self.body = body
        self.hdrs = dict(h.split(": ", 1) for h in extra[1::2])

        def conn_to(u):
            p = urllib.parse.urlsplit(u)
            return http.client.HTTPConnection(p.hostname, p.port, timeout=60)
        self.ours = conn_to(url)
        self.floor = conn_to(minimal) if minimal else None
        self.res, self.fl = [], []
        self.parts = []  # our answers' Server-Timing phases, {name: ms}
        self.floor_pid = floor_pid
        self.fl_cpu = [0.0, 0.0]  # the floor turns' CPU time: client, minimal server
        self._requests(self.ours, self.path, 3)  # warm
        self.parts = []

    def _requests(self, conn, target, n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            conn.request("POST", target, self.body, self.hdrs)
            r = conn.getresponse()
            data = r.read()
            wall = time.perf_counter() - t0
            if r.status != 200:
                print("keep-alive %s: HTTP %d" % (target, r.status))
                sys.exit(1)
            st = r.getheader("server-timing") or ""
            out.append((wall, compute_s(st), len(data)))
            if conn is self.ours:
                self.parts.append(timing_parts(st))
        return out

    def turn(self):
        self.res += self._requests(self.ours, self.path, KA_BATCH)
        if self.floor:
            pids = ("self", self.floor_pid) if self.floor_pid else ()
            t0 = [cpu_s(p) for p in pids]
            self.fl += [w for w, _, _ in
                        self._requests(self.floor, "/?bytes=%d" % self.res[-1][2], KA_BATCH)]
            for i, p in enumerate(pids):
                self.fl_cpu[i] += cpu_s(p) - t0[i]

    def report(self):
        res, fl = self.res, self.fl
        w = statistics.median(a for a, _, _ in res)
        c = statistics.median(b for _, b, _ in res)
        f = statistics.median(fl) if fl else 0.0
        print()
        print("The v2 request without weights, one at a time on one kept-alive connection "
              "(Python's http.client, as inference clients keep theirs): %d requests, %d a "
              "round beside curl's, each turn followed by the minimal server's:"
              % (len(res), KA_BATCH))
        print("| way | wall ms (median) | compute ms (median) | wall / compute | "
              "transfer floor ms |")
        print("|---|---:|---:|---:|---:|")
        print("| v2-noweights-keepalive | %.2f | %.2f | %.2f | %s |"
              % (w * 1e3, c * 1e3, statistics.median(a / b for a, b, _ in res),
                 "%.2f" % (f * 1e3) if fl else ""))
        # where a request's wall time goes: the server's phases as its
        # Server-Timing header gives them (receive: the body's first byte
        # to its last), and the rest (the client, the answer's transfer)
        names = ("receive", "decode", "queue", "compute", "encode")
        med = {k: statistics.median(p.get(k, 0.0) for p in self.parts) for k in names}
        print()
        print("Where its wall time goes (medians, ms): %s; the rest of the wall (the client, "
              "the request's first bytes, the answer's transfer): %.2f"
              % (", ".join("%s %.2f" % (k, med[k]) for k in names),
                 w * 1e3 - sum(med.values())))
        print()
        print("RATE v2-keepalive %.1f %.1f" % (flops() / w / 1e9, flops() / c / 1e9))
        if fl:
            print("FLOOR v2-keepalive %.2f" % (f * 1e3))
            print("BOUND v2-keepalive %.3f" % ((f + c) / c))
        if fl and self.floor_pid:
            # Overlapping the transfer with compute can hide its wall time
            # but not its CPU time: moving the bytes (the client's and the
            # server's threads, the kernel's loopback work done in their
            # system calls included) takes CPU time on the cores the pool
            # computes on, so even a perfect overlap leaves compute + that
            # CPU time / the cores.
            cl, sv = (x / len(fl) for x in self.fl_cpu)
            cores = len(os.sched_getaffinity(0))
            print("The transfer floor's CPU time a request: client %.2f ms, minimal server %.2f "
                  "ms (%.2f ms of wall): overlapping the transfer with compute would leave at "
                  "least compute + %.2f ms on %d cores"
                  % (cl * 1e3, sv * 1e3, f * 1e3, (cl + sv) / cores * 1e3, cores))
            print("OVERLAP v2-keepalive %.3f" % ((c + (cl + sv) / cores) / c))

if __name__ == "__main__":
    main()
