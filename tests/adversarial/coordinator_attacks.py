#!/usr/bin/env python3
"""Attacks on `loco coordinator` by someone on its network without the run's secret (issue 35; the table
in docs/security.md "Bad input tried"). Each attack is bounded in bytes and time and asserts its exact
outcome; the growth of the coordinator's peak resident memory is read from /proc.

    tests/adversarial/coordinator_attacks.py LOCO_BINARY [--report]

--report prints what each attack returned without asserting (to compare a binary before a fix). Only the
coordinator this script starts is signalled, by its pid. Standard library only.
"""
import gzip
import hashlib
import hmac
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

SECRET = "adversarial-suite-secret"
RUN = "adv"
MIB = 1024 * 1024


def mac(key, *fields):
    return hmac.new(key.encode(), "\n".join(str(f) for f in fields).encode(), hashlib.sha256).hexdigest()


def peak_rss_mb(pid):
    """The process's peak resident memory so far: what an attack made it hold at its worst."""
    return int(re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())[1]) / 1024


def read_answer(sock, timeout=10):
    """The status line and body of the answer on `sock` (None on a reset or no answer within `timeout`)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length:\s*(\d+)", head)
        while length and len(body) < int(length[1]):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    if not data.startswith(b"HTTP/"):
        return None, b""
    return int(data.split()[1]), body


def request(port, head, body=b"", timeout=10):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head + body)
        return read_answer(s, timeout)


def post(port, path, document, key=None, timeout=10):
    text = json.dumps(document).encode()
    extra = f"X-Loco-Mac: {mac(key, 'request', path, text.decode())}\r\n" if key else ""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(text)}\r\n\r\n"
    status, body = request(port, head.encode(), text, timeout)
    return status, body.decode(errors="replace")


class Member:
    """A member as loco's member client is one: joins by challenge and answer, signs every message."""

    def __init__(self, port, name):
        self.port = port
        _, challenge = post(port, "/v1/challenge", {})
        nonce, stamp = json.loads(challenge)["nonce"], int(time.time())
        status, joined = post(port, "/v1/join", {"run_id": RUN, "name": name, "nonce": nonce, "timestamp": stamp,
                                                 "mac": mac(SECRET, "loco-join", RUN, name, nonce, stamp)})
        assert status == 200, (status, joined)
        joined = json.loads(joined)
        self.id, self.incarnation = joined["member_id"], joined["incarnation"]
        self.key = mac(SECRET, "loco-session", self.id, self.incarnation, nonce)
        self.seq = 0
        self.lock = threading.Lock()

    def send(self, path, body, seq=None, timeout=10):
        with self.lock:
            self.seq += 1
            seq = self.seq if seq is None else seq
        return post(self.port, path, {**body, "member_id": self.id, "incarnation": self.incarnation, "seq": seq},
                    self.key, timeout)


class Coordinator:
    def __init__(self, loco):
        self.process = subprocess.Popen(
            [loco, "coordinator", "--host", "127.0.0.1", "--port", "0", "--store-port", "0", "--run-id", RUN,
             "--min-replicas", "1", "--heartbeat-timeout-s", "30"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, LOCO_RUN_SECRET=SECRET))
        banner = self.process.stdout.readline()
        found = re.search(r"127\.0\.0\.1:(\d+).*store on port (\d+)", banner)
        assert found, banner
        self.port, self.store_port = int(found[1]), int(found[2])
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.process.stderr), daemon=True).start()

    def rss_mb(self):
        return peak_rss_mb(self.process.pid)

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        self.process.terminate()  # this script's own child, by its pid
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def body_attack(c, head, send_body):
    """Sends `head`, then `send_body(socket)` on a thread, and reads the answer; (status, MB grown, seconds)."""
    before, began = c.rss_mb(), time.perf_counter()
    with socket.create_connection(("127.0.0.1", c.port), timeout=30) as s:
        s.sendall(head)
        sender = threading.Thread(target=lambda: _quietly(send_body, s), daemon=True)
        sender.start()
        status, _ = read_answer(s, 30)
        sender.join(30)
    time.sleep(0.2)
    return status, round(c.rss_mb() - before), round(time.perf_counter() - began, 2)


def _quietly(send, s):
    try:
        send(s)
    except OSError:  # the coordinator closed the connection: what a refusal may do
        pass


def chunked_100mb(s):
    piece = b"%x\r\n" % MIB + b"x" * MIB + b"\r\n"
    for _ in range(100):
        s.sendall(piece)
    s.sendall(b"0\r\n\r\n")


def unterminated_100mb(s):
    for _ in range(100):
        s.sendall(b"x" * MIB)
    s.shutdown(socket.SHUT_WR)


def deep_json_chunked(s):
    depth = 2_000_000
    data = b"[" * depth + b"]" * depth
    for i in range(0, len(data), MIB):
        piece = data[i:i + MIB]
        s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
    s.sendall(b"0\r\n\r\n")


def run(loco, report):
    results = []  # (attack, outcome, passed)

    def check(attack, outcome, passed):
        results.append((attack, outcome, passed))
        print(f"{'ok  ' if passed else 'FAIL'} {attack}: {outcome}", flush=True)

    c = Coordinator(loco)
    try:
        post_head = b"POST /v1/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        status, grown, seconds = body_attack(c, post_head + b"Transfer-Encoding: chunked\r\n\r\n", chunked_100mb)
        check("100 MB body, chunked", f"{status}, +{grown} MB resident, {seconds} s", status == 411 and grown < 20)
        status, grown, seconds = body_attack(c, post_head + b"\r\n", unterminated_100mb)
        check("100 MB body without Content-Length, ended by half-close", f"{status}, +{grown} MB, {seconds} s",
              status == 411 and grown < 20)
        bomb = gzip.compress(b"\0" * (60 * MIB), 9)
        status, grown, seconds = body_attack(
            c, post_head + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb), lambda s: s.sendall(bomb))
        check(f"gzip body of {len(bomb) // 1024} KiB inflating to 60 MB", f"{status}, +{grown} MB, {seconds} s",
              status == 415 and grown < 20)
        status, grown, seconds = body_attack(c, post_head + b"Transfer-Encoding: chunked\r\n\r\n", deep_json_chunked)
        check("JSON array 2,000,000 deep, chunked", f"{status}, +{grown} MB, {seconds} s", status == 411 and grown < 20)
        deep = b"[" * (64 * 1024)
        status, _ = request(c.port, post_head + b"Content-Length: %d\r\n\r\n" % len(deep), deep)
        check("JSON array 65,536 deep within 64 KiB", f"{status}", status == 400)
        status, _ = request(c.port, post_head + b"Content-Length: 104857600\r\n\r\n", b"{}")
        check("Content-Length of 100 MB", f"{status}", status == 413)
        long_line = b"GET /" + b"a" * (16 * MIB)
        status, grown, seconds = body_attack(c, b"", lambda s: s.sendall(long_line))
        check("request line of 16 MB without CRLF", f"{status}, +{grown} MB, {seconds} s",
              status == 431 and grown < 20)
        check("the coordinator is still up", f"{'yes' if c.alive() else 'no'}", c.alive())

        member = Member(c.port, "honest")
        # Slow loris: connections that send a header line every 2 s, while the member heartbeats. 600: more
        # than the 256 connections the coordinator lets wait for their request (the attack was 300).
        slow, trickling = [], threading.Event()
        for _ in range(600):
            try:
                s = socket.create_connection(("127.0.0.1", c.port), timeout=5)
                s.sendall(b"POST /v1/heartbeat HTTP/1.1\r\n")
                slow.append(s)
            except OSError:
                break

        def trickle():
            while not trickling.wait(2):
                for s in slow:
                    try:
                        s.sendall(b"X-Slow: 1\r\n")
                    except OSError:
                        pass

        threading.Thread(target=trickle, daemon=True).start()
        beats, worst, failed = 0, 0.0, 0
        deadline = time.time() + 15
        while time.time() < deadline:
            began = time.perf_counter()
            try:
                status, _ = member.send("/v1/heartbeat", {}, timeout=3)
            except OSError:
                status = None
            worst = max(worst, time.perf_counter() - began)
            beats += 1
            failed += status != 200
            time.sleep(0.25)
        status_page, _ = request(c.port, b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)
        trickling.set()
        for s in slow:
            s.close()
        check(f"{len(slow)} slow-loris connections (a header line every 2 s) for 15 s",
              f"{beats - failed} of {beats} signed heartbeats answered 200, slowest {worst * 1000:.0f} ms; /status {status_page}",
              failed == 0 and worst < 1.0 and status_page == 200)

        # Without the session's key, a known and an unknown id get the same answer.
        known = post(c.port, "/v1/heartbeat", {"member_id": member.id, "incarnation": member.incarnation, "seq": 5})
        unknown = post(c.port, "/v1/heartbeat", {"member_id": "ghost#1", "incarnation": member.incarnation, "seq": 5})
        same = known[0] == unknown[0] and known[1].replace(member.id, "ghost#1") == unknown[1]
        check("heartbeat without a MAC for an existing vs a made-up member id", f"{known[0]} vs {unknown[0]}, "
              f"bodies {'identical but for the id' if same else 'differ'}", same)

        # Names and ids with newlines or escape bytes do not write lines of their own into the log.
        forged = "x\nloco coordinator: commit q1 step 999 forged"
        _, challenge = post(c.port, "/v1/challenge", {})
        run_status, _ = post(c.port, "/v1/join", {"run_id": forged, "name": "a", "nonce": json.loads(challenge)["nonce"],
                                                  "timestamp": int(time.time()), "mac": "00"})
        _, challenge = post(c.port, "/v1/challenge", {})
        name_status, _ = post(c.port, "/v1/join", {"run_id": RUN, "name": "\x1b[31mred\nloco coordinator: commit", "nonce":
                                                   json.loads(challenge)["nonce"], "timestamp": int(time.time()), "mac": "00"})
        time.sleep(0.3)
        lines = "".join(c.log).splitlines()
        forged_lines = [line for line in lines if line.startswith("loco coordinator: commit")]
        raw_escape = any("\x1b" in line for line in lines)
        check("join with a run id / name holding a newline and ESC", f"{run_status} / {name_status}; forged log lines: "
              f"{len(forged_lines)}, raw ESC in log: {'yes' if raw_escape else 'no'}",
              run_status == 403 and not forged_lines and not raw_escape)

        # A member's signed but extreme numbers.
        huge_step = member.send("/v1/quorum", {"step": 2**63 - 1, "wait_s": 0})
        status_json = json.loads(request(c.port, b"GET /status HTTP/1.1\r\n\r\n")[1])
        check("signed quorum request at step 2^63-1", f"{huge_step[0]}; run finished: {status_json['finished']}",
              huge_step[0] == 400 and status_json["finished"] is False)
        huge_seq = member.send("/v1/heartbeat", {}, seq=2**64 - 1)
        after = member.send("/v1/heartbeat", {})
        check("signed heartbeat with seq 2^64-1, then the next seq", f"{huge_seq[0]}, then {after[0]}",
              huge_seq[0] == 401 and after[0] == 200)

        # A leave's reason reaches the token holder's dashboard as data (/status JSON), never as the page's
        # markup: the page is the same file for every run, and its script shows values as text
        # (tests/browser/dashboard_browser_test.py checks that in a browser).
        other = Member(c.port, "leaver")
        other.send("/v1/leave", {"reason": "<script>alert(1)</script>"})
        token = mac(SECRET, "loco-status", RUN)
        _, page = request(c.port, f"GET /?token={token} HTTP/1.1\r\n\r\n".encode())
        _, status_body = request(c.port, f"GET /status?token={token} HTTP/1.1\r\n\r\n".encode())
        reasons = [e["detail"] for e in json.loads(status_body)["events"] if e["kind"] == "leave"]
        in_page = b"alert(1)" in page
        check("leave reason <script> on the dashboard", "in the page" if in_page else f"data only: {reasons}",
              not in_page and any("<script>alert(1)</script>" in r for r in reasons))

        # A member's signed messages with a field of the wrong type, or a vote in no quorum (quorum id 0,
        # before this coordinator formed one for it), and a join claiming an impossible pipeline stage.
        odd = Member(c.port, "odd")
        bad_leave = odd.send("/v1/leave", {"reason": "x", "finished": "yes"})
        early_vote = odd.send("/v1/commit", {"quorum_id": 0, "step": 0, "ok": True, "hash": "h", "wait_s": 0})
        after_odd = odd.send("/v1/heartbeat", {})
        _, challenge = post(c.port, "/v1/challenge", {})
        bad_stage, _ = post(c.port, "/v1/join", {"run_id": RUN, "name": "stage", "nonce": json.loads(challenge)["nonce"],
                                                 "timestamp": int(time.time()), "mac": "00",
                                                 "pipeline": {"replica": "r", "stage": -1, "stages": 2}})
        check("signed leave with finished: \"yes\", a vote in quorum 0, a join at stage -1 of 2",
              f"{bad_leave[0]}, {early_vote[0]}, {bad_stage}; a heartbeat after: {after_odd[0]}",
              bad_leave[0] == 400 and early_vote[0] == 409 and bad_stage == 400 and after_odd[0] == 200)

        # The store: a SET announcing a 256 MiB value, sent in part, while another client uses the store.
        before = c.rss_mb()
        half = socket.create_connection(("127.0.0.1", c.store_port), timeout=5)
        key = b"k" * 10
        half.sendall(struct.pack("<B", 0) + struct.pack("<Q", len(key)) + key + struct.pack("<Q", 256 * MIB))
        time.sleep(0.5)
        probe = subprocess.run([sys.executable, "-c", STORE_CLIENT, str(c.store_port)], capture_output=True, text=True,
                               timeout=60)
        grown = round(c.rss_mb() - before)
        half.close()
        check("store: 27 bytes of a SET announcing 256 MiB, then another client's set/get",
              f"other client: {probe.stdout.strip() or probe.stderr.strip()[-200:]}; +{grown} MB",
              probe.stdout.strip().startswith("served") and grown < 20)
    finally:
        c.stop()
    failed = [r for r in results if not r[2]]
    if failed and not report:
        print(f"{len(failed)} of {len(results)} attacks did not get the outcome expected", file=sys.stderr)
        return 1
    return 0


# A second client of the store, speaking c10d's TCPStore protocol (libtorch 1.13: a query byte, then
# 8-byte little-endian lengths before keys and values): SET then GET, served within 5 s?
STORE_CLIENT = """
import socket, struct, sys, time
began = time.perf_counter()
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    key, value = b"probe", b"1"
    s.sendall(struct.pack("<BQ", 0, len(key)) + key + struct.pack("<Q", len(value)) + value)
    s.sendall(struct.pack("<BQ", 2, len(key)) + key)
    answer = b""
    while len(answer) < 9:
        piece = s.recv(9 - len(answer))
        if not piece:
            break
        answer += piece
    assert answer == struct.pack("<Q", 1) + value, answer
    print(f"served in {time.perf_counter() - began:.2f} s")
except Exception as e:
    print(f"not served within 5 s ({type(e).__name__})")
"""

if __name__ == "__main__":
    sys.exit(run(sys.argv[1], "--report" in sys.argv))
