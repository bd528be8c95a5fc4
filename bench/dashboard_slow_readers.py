#!/usr/bin/env python3
"""What slow readers cost `loco dashboard` (docs/dashboard.md "What one asker can hold"; docs/results.md).

    bench/dashboard_slow_readers.py [LOCO_BINARY] [--readers N] [--seconds S]

Writes a run directory whose metrics.jsonl holds 100 lines, each with a membership event of ~1 MB (the largest
line the dashboard reads), starts `loco dashboard` on it, lets it read the file in, then opens N connections
(default 12) that ask /status and /history?after=0 and read one byte every 3 s, and samples the dashboard's
resident memory every second for S seconds (default 40). Prints the resident memory before the readers (the
peer in the same run), the peak with them, and the size of one /status answer.
Only the dashboard this script starts is signalled, by its pid. Standard library only.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read())[1]) / 1024


def slow_reader(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.settimeout(5)
    while True:
        try:
            if not s.recv(1):
                return  # the whole answer read, or the server closed the connection
        except socket.timeout:
            pass
        except OSError:
            return
        time.sleep(3)


def main():
    args = sys.argv[1:]
    loco = args[0] if args and not args[0].startswith("--") else "build/loco"
    readers = int(args[args.index("--readers") + 1]) if "--readers" in args else 12
    seconds = int(args[args.index("--seconds") + 1]) if "--seconds" in args else 40
    with tempfile.TemporaryDirectory() as run:
        with open(os.path.join(run, "metrics.jsonl"), "w") as f:
            for step in range(100):
                event = {"kind": "join", "detail": "A" * 1_000_000}
                f.write(json.dumps({"step": step, "loss": 1.0, "elapsed_s": step, "membership_events": [event]}) + "\n")
        dashboard = subprocess.Popen([loco, "dashboard", run, "--port", "0"], stdout=subprocess.PIPE, text=True)
        try:
            port = int(re.search(r"127\.0\.0\.1:(\d+)", dashboard.stdout.readline())[1])
            for _ in range(40):  # read the file in: at most 4 MiB a poll
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30).read()
                time.sleep(0.6)
            answer = len(urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30).read())
            before = rss_mb(dashboard.pid)
            began = time.time()
            for i in range(readers):
                path = "/status" if i % 2 == 0 else "/history?after=0"
                threading.Thread(target=slow_reader, args=(port, path), daemon=True).start()
            peak = before
            while time.time() - began < seconds:
                peak = max(peak, rss_mb(dashboard.pid))
                time.sleep(1)
            alive = dashboard.poll() is None
        finally:
            dashboard.terminate()
            dashboard.wait(10)
    print(f"machine: {os.cpu_count()} cores; loco dashboard of 100 lines with ~1 MB events; one /status answer "
          f"{answer} bytes")
    print(f"resident before the readers: {before:.0f} MB; peak with {readers} readers taking a byte every 3 s: "
          f"{peak:.0f} MB; still up: {'yes' if alive else 'no'}")
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
