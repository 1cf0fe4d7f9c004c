#!/usr/bin/python3
"""wall_ratio.py - what one large request costs a client, against compute.

    tests/bench/wall_ratio.py URL [MODEL] [ROUNDS]     (bench-http.sh runs it)
    tests/bench/wall_ratio.py --answer-bytes           the v2 binary answer's size
    tests/bench/wall_ratio.py --floor URL [ROUNDS]     the v2 body to a minimal server

One request at a time (no concurrency): n=512 tokens of E=768 on the weight
set MODEL (default "large", 12 heads) with per-head attention weights, sent
by curl (a real client; it decompresses gzip itself) the ways a user would:

  v2-binary       POST /v2/models/MODEL/infer, binary tensors in and out
  attend-base64   POST /attend, encoding_format base64
  attend-float    POST /attend, float JSON
  attend-float-gz the same with Accept-Encoding: gzip (curl --compressed)

Rounds alternate the four (ROUNDS, default 7). Per request: curl's
time_total (the client's wall time, connection to last byte) and the
compute time from the answer's Server-Timing header. Prints per way the
median wall time, the median compute time, and the median of each request's
wall / compute; then gzip / plain as the ratio of the medians of wall time.
The last lines are machine-readable "RATIO name value".
"""

import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile

N, E = 512, 768


def v2_body():
    rnd = random.Random(5)
    x = [round(rnd.uniform(-1, 1), 3) for _ in range(N * E)]
    raw = struct.pack("<%df" % (N * E), *x)
    head = json.dumps({"inputs": [{"name": "embeddings", "shape": [N, E], "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "parameters": {"binary_data_output": True}}).encode()
    return x, raw, head


def floor(url, rounds):
    """Median ms for curl to send the v2 body to url and read its answer."""
    _, raw, head = v2_body()
    fd, path = tempfile.mkstemp()
    os.write(fd, head + raw)
    os.close(fd)
    times = []
    for r in range(rounds + 1):
        out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}",
                              "--data-binary", "@" + path, url + "/"],
                             capture_output=True, text=True).stdout
        if r:
            times.append(float(out))
    os.unlink(path)
    return statistics.median(times) * 1e3


def main():
    if sys.argv[1] == "--answer-bytes":  # output + weights, float32, and a header
        print(N * E * 4 + 12 * N * N * 4 + 260)
        return
    if sys.argv[1] == "--floor":
        print("%.1f" % floor(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 7))
        return
    url = sys.argv[1]
    model = sys.argv[2] if len(sys.argv) > 2 else "large"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    x, raw, head = v2_body()
    tmp = tempfile.mkdtemp()
    files = {}
    files["v2-binary"] = (head + raw, "/v2/models/%s/infer" % model,
                          ["-H", "Content-Type: application/octet-stream",
                           "-H", "Inference-Header-Content-Length: %d" % len(head)])
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
    for r in range(rounds + 1):
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
            comp = [p for p in parts[3].split(",") if "compute" in p]
            compute = float(comp[0].split("dur=")[1]) / 1e3
            if r:  # round 0 warms up
                res[k].append((wall, compute, int(parts[2])))
    print("| way | bytes received | wall ms (median) | compute ms (median) | wall / compute |")
    print("|---|---:|---:|---:|---:|")
    ratios = {}
    for k, v in res.items():
        w = statistics.median(a for a, _, _ in v)
        c = statistics.median(b for _, b, _ in v)
        q = statistics.median(a / b for a, b, _ in v)
        ratios[k] = q
        print("| %s | %d | %.1f | %.1f | %.2f |" % (k, v[-1][2], w * 1e3, c * 1e3, q))
    gz = statistics.median(a for a, _, _ in res["attend-float-gz"]) / \
        statistics.median(a for a, _, _ in res["attend-float"])
    print()
    for k, q in ratios.items():
        print("RATIO %s %.3f" % (k, q))
    print("RATIO gzip-over-plain %.3f" % gz)


if __name__ == "__main__":
    main()
