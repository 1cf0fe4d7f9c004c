#!/usr/bin/python3
"""memory_clients.py PORT - slow readers and stalled uploads against a server
(the demo model), for the container test under a memory limit.

12 clients ask for 1024 tokens' per-head weights as float JSON (~50 MB
answers) and read nothing; 8 announce 64 MiB bodies and send 4 MiB. For 5 s
/healthz is asked every 0.1 s. Then everyone leaves. Prints the slowest
/healthz in seconds and the status of one request made after, and exits 0
when both are fine (under 1 s, 200)."""
import http.client
import json
import socket
import sys
import time

port = int(sys.argv[1])
rows = [[((i * 64 + j) % 200 - 100) / 100 for j in range(64)] for i in range(1024)]
body = json.dumps({"embeddings": rows}).encode()
req = (b"POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
       b"Content-Length: %d\r\n\r\n" % len(body)) + body
socks = []
for _ in range(12):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(req)
    socks.append(s)
for _ in range(8):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % (64 << 20))
    s.settimeout(2)
    try:
        for _ in range(4):
            s.sendall(b" " * (1 << 20))
    except OSError:
        pass
    socks.append(s)
worst, t_end = 0.0, time.time() + 5
while time.time() < t_end:
    t0 = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz")
        c.getresponse().read()
        c.close()
        worst = max(worst, time.time() - t0)
    except OSError:
        worst = 99
    time.sleep(0.1)
for s in socks:
    s.close()
time.sleep(2)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("POST", "/attend", body=json.dumps({"embeddings": rows[:256]}),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
r.read()
print("%.3f %d" % (worst, r.status))
sys.exit(0 if worst < 1 and r.status == 200 else 1)
