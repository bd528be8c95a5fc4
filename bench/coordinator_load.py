#!/usr/bin/env python3
"""The coordinator's own cost with many members (docs/fault-tolerance.md "The coordinator").

    bench/coordinator_load.py [--members 32] [--seconds 30] [--round-s 2] [--loco build/loco]

Starts `loco coordinator` and MEMBERS simulated members in this process, each speaking the protocol as
`loco train` does: it joins by challenge and answer under the run's secret and signs every message with its
session's key (src/loco/membership/authentication.h), heartbeats every heartbeat_interval_s (0.1 s) from a
thread of its own, and every ROUND_S seconds asks for a quorum (long poll) and votes, like one outer step.
After SECONDS prints
one JSON line: the coordinator's CPU time (user + system, from /proc) per second of wall time, its peak
resident memory, the requests the members sent, the quorums and commits the coordinator logged, and the
99th percentile of a heartbeat's round trip. Standard library only.
"""
import argparse
import hashlib
import hmac
import http.client
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "coordinator-load-benchmark-secret"


def mac(key, *fields):
    """HMAC-SHA256 of the fields joined by newlines, as authentication.h computes it."""
    return hmac.new(key.encode(), "\n".join(str(f) for f in fields).encode(), hashlib.sha256).hexdigest()


def post(port, path, body, timeout=15, key=None):
    text = json.dumps(body)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["X-Loco-Mac"] = mac(key, "request", path, text)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("POST", path, text, headers)
    reply = connection.getresponse()
    data = reply.read()
    connection.close()
    return reply.status, json.loads(data)


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def peak_rss_mb(pid):
    return int(re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())[1]) / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=32)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--round-s", type=float, default=2)
    p.add_argument("--loco", default=os.environ.get("LOCO", os.path.join(ROOT, "build", "loco")))
    args = p.parse_args()
    coordinator = subprocess.Popen(
        [args.loco, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id", "load", "--min-replicas", "1",
         "--start-replicas", str(args.members), "--heartbeat-timeout-s", "3", "--join-window-s", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, LOCO_RUN_SECRET=SECRET))
    banner = coordinator.stdout.readline()
    port = int(re.search(r"127\.0\.0\.1:(\d+)", banner)[1])
    events = {"quorum": 0, "commit": 0, "abort": 0}

    def read_log():
        for line in coordinator.stderr:
            found = re.match(r"loco coordinator: (\w+) ", line)
            if found and found[1] in events:
                events[found[1]] += 1

    threading.Thread(target=read_log, daemon=True).start()
    stop = threading.Event()
    requests = [0]
    heartbeat_times = []
    lock = threading.Lock()

    def member(index):
        try:
            simulated_member(index)
        except OSError:
            if not stop.is_set():  # connection errors are expected only once the coordinator is stopped
                raise

    def simulated_member(index):
        name = f"m{index}"
        while True:  # as loco's member client, a join the coordinator did not accept is tried again
            try:
                _, challenge = post(port, "/v1/challenge", {})
                nonce, stamp = challenge["nonce"], int(time.time())
                _, joined = post(port, "/v1/join", {"run_id": "load", "name": name, "nonce": nonce, "timestamp": stamp,
                                                    "mac": mac(SECRET, "loco-join", "load", name, nonce, stamp)})
                break
            except OSError:
                time.sleep(0.25)
        key = mac(SECRET, "loco-session", joined["member_id"], joined["incarnation"], nonce)
        numbers = itertools.count(1)  # the session's sequence numbers, shared by both threads
        numbers_lock = threading.Lock()

        def signed(path, body, timeout=15):
            with numbers_lock:
                seq = next(numbers)
            return post(port, path, {**body, "member_id": joined["member_id"], "incarnation": joined["incarnation"],
                                     "seq": seq}, timeout, key)

        interval = joined["heartbeat_interval_s"]

        def heartbeat():
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    signed("/v1/heartbeat", {})
                except OSError:  # counted as a slow beat; the member beats again
                    pass
                with lock:
                    heartbeat_times.append(time.perf_counter() - began)
                    requests[0] += 1
                stop.wait(interval)

        threading.Thread(target=heartbeat, daemon=True).start()
        step = 0
        while not stop.is_set():
            while True:
                status, quorum = signed("/v1/quorum", {"step": step, "wait_s": 5})
                with lock:
                    requests[0] += 1
                if status == 200 or stop.is_set():
                    break
            if stop.is_set():
                return
            if step > 0:
                while True:
                    status, _ = signed("/v1/commit", {"quorum_id": quorum["quorum_id"], "step": step, "ok": True,
                                                      "hash": f"h{step}", "wait_s": 5})
                    with lock:
                        requests[0] += 1
                    if status == 200 or stop.is_set():
                        break
            step += 10
            stop.wait(args.round_s)

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(args.members)]
    for t in threads:
        t.start()
    time.sleep(1)  # every member joined and heartbeats
    cpu_before, wall_before, requests_before = cpu_seconds(coordinator.pid), time.time(), requests[0]
    time.sleep(args.seconds)
    cpu, wall, sent = cpu_seconds(coordinator.pid) - cpu_before, time.time() - wall_before, requests[0] - requests_before
    rss = peak_rss_mb(coordinator.pid)
    stop.set()
    coordinator.terminate()
    coordinator.wait(10)
    times = sorted(heartbeat_times)
    print(json.dumps({
        "benchmark": "coordinator under simulated members (bench/coordinator_load.py)",
        "machine": f"{os.cpu_count()} cores, {platform.machine()}", "members": args.members,
        "round_s": args.round_s, "seconds": round(wall, 1),
        "coordinator_cpu_fraction_of_one_core": round(cpu / wall, 4), "coordinator_peak_rss_mb": round(rss, 1),
        "requests_per_s": round(sent / wall, 1), "quorums_logged": events["quorum"], "commits": events["commit"],
        "aborts": events["abort"],
        "heartbeat_round_trip_ms": {"median": round(1000 * times[len(times) // 2], 2),
                                    "p99": round(1000 * times[int(len(times) * 0.99)], 2)},
    }))


if __name__ == "__main__":
    sys.exit(main())
