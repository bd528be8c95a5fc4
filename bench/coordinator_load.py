#!/usr/bin/env python3
"""The elastic-run coordinator's own cost with many members (issue 37).

What it measures: `loco coordinator` serving MEMBERS simulated members (default 32) that heartbeat at the
interval the coordinator gives them (0.1 s today), optionally each heartbeat carrying K training-metrics
points, and that every ROUND_S seconds (default 2) run one outer step's synchronisation: ask for a quorum
(POST /v1/quorum, a long poll), vote on the commit (POST /v1/commit, ok, with the same hash from every
member) and wait for the decision. Over a window after a warm-up: the requests per second of every kind,
the quorums formed and the outer steps committed (or aborted), the coordinator's CPU (utime + stime from
/proc/PID/stat, as % of one core: 100 x its CPU seconds per wall second), its peak and current resident
memory (VmHWM, VmRSS), the heartbeats' round trip (p50, p90, p99, max), and every refusal or error (there
must be none). After the window: the time and size of `GET /status` with the status token, and of
`GET /history?after=0` where the coordinator serves it. docs/results.md ("The coordinator with 32
members") quotes these figures.

Each simulated member speaks the real member protocol (src/loco/membership/authentication.h,
member_client.cpp): POST /v1/challenge, POST /v1/join with the HMAC-SHA256 proof of the run's secret, then
requests with a sequence number and X-Loco-Mac under the session key, one fresh connection per request
(the coordinator serves one request per connection), and it checks the MAC of every answer as a member
does. A member is two threads of this process, as in loco train: one heartbeats, the other runs the rounds;
they share the session and its sequence numbers. The coordinator is started as the earlier version of this
script started it (--min-replicas 1, --start-replicas MEMBERS, --join-window-s 1), so the figures in
docs/results.md are reproduced by the same command. The script reports its own CPU too, since it shares
the machine with the coordinator.

How to run (Python 3, standard library only):

    /usr/bin/python3 bench/coordinator_load.py                          # 32 members, 20 s, rounds every 2 s
    /usr/bin/python3 bench/coordinator_load.py --members 32 --seconds 30    # the command of docs/results.md
    /usr/bin/python3 bench/coordinator_load.py --round-s 0              # heartbeats only, no quorums
    /usr/bin/python3 bench/coordinator_load.py --metrics-per-beat 4 --report-every 10
    /usr/bin/python3 bench/coordinator_load.py --compare --json out.json    # K = 0, then K = 1, one table
    /usr/bin/python3 bench/coordinator_load.py --members 8 --seconds 5 --loco OTHER/loco

Defaults: 32 members, a 2 s warm-up, a 20 s window, a round every 2 s, no metrics (K = 0; 1 with
--compare), every heartbeat carrying them when K > 0 (--report-every 1), the coordinator's heartbeat
timeout 3 s.

Before and after (issue 37: members report their training metrics to the coordinator, which keeps them):
"before" is the load without metrics (K = 0), what members send today; "after" is the same load, rounds
included, with K metrics points per heartbeat (`"metrics": [...]`, every `--report-every`-th heartbeat).
`--compare` runs both, one after the other in one invocation on the same machine and binary, and prints
them side by side. A coordinator that does not keep metrics ignores the field (it still reads and MACs
it), so against it the difference is only the larger messages; against one that keeps them it is the
whole cost. Run it with `--loco` naming each binary to compare coordinators.

Bounded: every stage has a time limit and the whole run an alarm; the coordinator this script started
(and only it, by its pid) is stopped on every way out.
"""
import argparse
import collections
import hashlib
import hmac
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_ID = "coordinator-load"
REQUEST_TIMEOUT_S = 5  # as the member client's request_timeout_s
JOIN_TIMEOUT_S = 30    # joins are retried while the coordinator does not accept the connection
START_TIMEOUT_S = 15   # for the coordinator's banner
LONG_POLL_WAIT_S = 5   # how long a quorum or commit request asks the coordinator to hold it (the member client's)
STEPS_PER_ROUND = 10   # inner steps between two outer steps (H): a round's step number grows by it
MAX_MESSAGE_BYTES = 64 * 1024  # the coordinator answers 413 to a larger body (coordinator_server.cpp)


# ---------------------------------------------------------------------------------------------------------
# The protocol's MACs (authentication.cpp): HMAC-SHA256, hex, over fields joined by newlines.

def hmac_hex(key, *fields):
    message = b"\n".join(f if isinstance(f, bytes) else str(f).encode() for f in fields)
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def status_token(secret, run_id):
    return hmac_hex(secret, "loco-status", run_id)


class Refused(Exception):
    """An answer that is not 200: the coordinator's refusal (status, its `refusal` kind and text)."""

    def __init__(self, path, status, body):
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):  # not the coordinator's refusal message (a 404 page, say)
            answer = {"error": body[:200].decode(errors="replace")}
        self.kind = answer.get("refusal", f"http_{status}")
        super().__init__(f"{path}: {status} {self.kind}: {answer.get('error')}")


class Unsigned(Exception):
    """An answer without the coordinator's MAC under the session key: a member uses nothing of it."""


def require_signed(key, path, seq, status, body, mac):
    """The coordinator signs its answer to a member's request `seq` (the join's as seq 0) under the session key."""
    if not hmac.compare_digest(mac, hmac_hex(key, "reply", path, seq, status, body)):
        raise Unsigned(f"the answer to {path} (seq {seq}) is not signed under the session key")


def post(port, path, body, headers=None, timeout=REQUEST_TIMEOUT_S):
    """One POST on a fresh connection; returns (status, raw body bytes, the answer's X-Loco-Mac)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
        reply = connection.getresponse()
        return reply.status, reply.read(), reply.getheader("X-Loco-Mac", "")
    finally:
        connection.close()


def get(port, path, token):
    """One GET with the status token; returns (status, body bytes, seconds)."""
    began = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.request("GET", path, headers={"X-Loco-Token": token})
        reply = connection.getresponse()
        data = reply.read()
        return reply.status, data, time.perf_counter() - began
    finally:
        connection.close()


# ---------------------------------------------------------------------------------------------------------
# The coordinator process and what /proc says about it.

class CoordinatorProcess:
    """`loco coordinator` on a free port of 127.0.0.1 with a fresh secret file in `workdir`, its quorum rules
    those of the earlier version of this script (docs/results.md): the first quorum waits for all `members`
    (so that every member is in every round), a later one waits at most 1 s for a member that is not back."""

    def __init__(self, loco, workdir, members, heartbeat_timeout_s):
        self.secret_file = os.path.join(workdir, "run.secret")  # absent: the coordinator writes a new one
        self.out_path = os.path.join(workdir, "coordinator.out")
        self.err_path = os.path.join(workdir, "coordinator.err")
        command = [loco, "coordinator", "--host", "127.0.0.1", "--port", "0", "--run-id", RUN_ID,
                   "--secret-file", self.secret_file, "--heartbeat-timeout-s", str(heartbeat_timeout_s),
                   "--min-replicas", "1", "--start-replicas", str(members), "--join-window-s", "1"]
        # Logs go to files, not pipes, so that nobody has to drain them. A new session has no controlling
        # terminal, so the coordinator writes its status link (with the token) to stdout, not to our tty.
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                            start_new_session=True)
        self.pid = self.process.pid
        self.port, self.incarnation = self._wait_for_banner()
        with open(self.secret_file) as f:
            self.secret = f.read().strip()  # as read_secret_file: trailing whitespace is not part of it

    def _wait_for_banner(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(r"on 127\.0\.0\.1:(\d+) \(incarnation (\d+)\)", open(self.out_path).read())
            if found:
                return int(found[1]), int(found[2])
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"loco coordinator did not start (exit {self.process.poll()}): "
                           f"{open(self.err_path).read()[-2000:]}")

    def refusals_logged(self):
        """The coordinator logs every refused message; a cross-check of what the members saw."""
        return sum(1 for line in open(self.err_path) if line.startswith("loco coordinator: refused"))

    def stop(self):
        """SIGTERM to our coordinator's pid, SIGKILL if it does not end within 10 s."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the command name may hold spaces: split after it
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid):
    """VmHWM (peak resident), VmRSS (resident now) in MiB and the thread count, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    kib = lambda name: int(re.search(rf"^{name}:\s+(\d+) kB", text, re.M)[1])
    return {"peak_rss_mib": kib("VmHWM") / 1024, "rss_mib": kib("VmRSS") / 1024,
            "threads": int(re.search(r"^Threads:\s+(\d+)", text, re.M)[1])}


# ---------------------------------------------------------------------------------------------------------
# Simulated members.

class MetricsLog:
    """One member's training log as loco train would report it: a point per logged step, step counting up,
    the loss falling with noise, an evaluation every 10th point, bytes growing at each outer step."""

    TOKENS_PER_STEP = 16 * 256
    OUTER_EVERY = 30  # inner steps per outer step (DiLoCo's H)

    def __init__(self, seed):
        self.random = random.Random(seed)
        self.step = 0

    def point(self):
        self.step += 1
        outer = self.step // self.OUTER_EVERY
        loss = 2.5 + 7.0 * 0.995 ** self.step + self.random.gauss(0, 0.05)
        point = {"step": self.step, "tokens": self.step * self.TOKENS_PER_STEP, "loss": loss,
                 "tokens_per_s": self.random.uniform(40000, 60000), "bytes_sent": outer * 20_262_912,
                 "bytes_recv": outer * 20_262_912, "comm_s": outer * self.random.uniform(1.5, 1.7),
                 "elapsed_s": self.step * 0.08 + self.random.random() * 1e-3, "outer_steps": outer, "heals": 0}
        if self.step % 10 == 0:
            point["eval_loss"] = loss + self.random.uniform(0.0, 0.1)
        return point

    def points(self, count):
        return [self.point() for _ in range(count)]


# What a join gives a member: its credentials and the key that signs every later message of the session.
Session = collections.namedtuple("Session", "member_id incarnation key")


class Member(threading.Thread):
    """A simulated member. This thread joins, starts the rounds' thread (when there are rounds) and heartbeats
    until `stop`; as in loco train, the two threads share the session and its sequence numbers."""

    def __init__(self, index, coordinator, load, stop):
        super().__init__(daemon=True, name=f"member-{index}")
        self.name_in_run = f"load-{index}"
        self.port, self.secret = coordinator.port, coordinator.secret
        self.metrics_per_beat, self.report_every = load["metrics_per_beat"], load["report_every"]
        self.round_s, self.stop = load["round_s"], stop
        self.log = MetricsLog(seed=index)
        self.joined = threading.Event()
        self.lock = threading.Lock()  # what both threads change: the session, its next seq, the errors
        self.session = None
        self.next_seq = 1
        self.beats_sent = 0
        self.requests = []     # (perf_counter when sent, path, seconds to the answer, body bytes) of answered ones
        self.quorums = []      # (perf_counter when answered, quorum id, step, members in it)
        self.decisions = []    # (perf_counter when answered, quorum id, step, outcome)
        self.errors = {}       # kind → count: refusals, unsigned answers, connection errors
        self.first_error = None
        self.join_retries = 0
        self.rejoins = 0

    def error(self, kind, what):
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1
            self.first_error = self.first_error or f"{self.name_in_run}: {what}"

    def run(self):
        try:
            self.join_run()
        except Exception as e:  # a member that cannot join is an error of the run, counted and reported
            self.error(type(e).__name__, e)
            return
        finally:
            self.joined.set()  # the starter waits on this; a failed member counts as done joining
        rounds = None
        if self.round_s:
            rounds = threading.Thread(target=self.until_failure, args=(self.rounds_until_stopped,), daemon=True,
                                      name=f"{self.name}-rounds")
            rounds.start()
        self.until_failure(self.heartbeat_until_stopped)
        if rounds:
            rounds.join()  # whoever joins this member waits for both threads

    def until_failure(self, work):
        """Runs `work`; what ends it early is an error of the run, counted and reported."""
        try:
            work()
        except Exception as e:
            self.error(type(e).__name__, e)

    # -- the session ---------------------------------------------------------------------------------------

    def join_run(self):
        """Challenge–response (authentication.h), retried while the coordinator does not accept connections
        (a burst of joins can fill its accept queue), as the member client's first join is."""
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while True:
            try:
                return self._join_once()
            except OSError:
                if time.monotonic() > deadline or self.stop.is_set():
                    raise
                self.join_retries += 1
                time.sleep(0.25)

    def _join_once(self):
        status, body, _ = post(self.port, "/v1/challenge", "{}")
        if status != 200:
            raise Refused("/v1/challenge", status, body)
        nonce, stamp = json.loads(body)["nonce"], int(time.time())
        request = {"run_id": RUN_ID, "name": self.name_in_run, "nonce": nonce, "timestamp": stamp,
                   "mac": hmac_hex(self.secret, "loco-join", RUN_ID, self.name_in_run, nonce, stamp)}
        status, body, mac = post(self.port, "/v1/join", json.dumps(request))
        if status != 200:
            raise Refused("/v1/join", status, body)
        joined = json.loads(body)
        key = hmac_hex(self.secret, "loco-session", joined["member_id"], joined["incarnation"], nonce)
        require_signed(key, "/v1/join", 0, status, body, mac)  # the join's answer is signed as seq 0
        self.interval_s = min(max(joined["heartbeat_interval_s"], 0.01), 10.0)  # the member client's clamp
        with self.lock:
            self.session = Session(joined["member_id"], joined["incarnation"], key)
            self.next_seq = 1  # a session's numbers count up from 1

    def rejoin(self):
        self.rejoins += 1
        try:
            self.join_run()
        except (OSError, Refused, Unsigned) as e:
            self.error("rejoin", e)

    def signed_post(self, path, fields, timeout=REQUEST_TIMEOUT_S):
        """One message of the session (member_client.cpp post_signed): the next sequence number, the request's
        MAC, the answer's MAC checked. Returns (status, answer) for 200 and 202 (a long poll not answered yet);
        any other status raises Refused."""
        with self.lock:
            session, seq = self.session, self.next_seq
            self.next_seq += 1
        body = json.dumps({"member_id": session.member_id, "incarnation": session.incarnation, "seq": seq, **fields},
                          separators=(",", ":"))
        began = time.perf_counter()
        status, answer, mac = post(self.port, path, body, {"X-Loco-Mac": hmac_hex(session.key, "request", path, body)},
                                   timeout)
        seconds = time.perf_counter() - began
        if status not in (200, 202):
            raise Refused(path, status, answer)
        require_signed(session.key, path, seq, status, answer, mac)
        self.requests.append((began, path, seconds, len(body)))
        return status, json.loads(answer)

    # -- heartbeats ----------------------------------------------------------------------------------------

    def heartbeat_until_stopped(self):
        # As the member client: beat, then wait the interval (not a fixed rate: a slow answer delays the next).
        while not self.stop.is_set():
            self.beat_once()
            self.stop.wait(self.interval_s)

    def beat_once(self):
        # Counted here, not by seq: the rounds' messages take sequence numbers too.
        self.beats_sent += 1
        fields = {}
        if self.metrics_per_beat and self.beats_sent % self.report_every == 0:
            fields["metrics"] = self.log.points(self.metrics_per_beat)
        try:
            self.signed_post("/v1/heartbeat", fields)
        except OSError as e:
            self.error("connection", e)
        except Unsigned as e:
            self.error("unsigned", e)
        except Refused as e:
            self.error(e.kind, e)
            if e.kind in ("unknown_member", "stale_incarnation"):
                self.rejoin()  # as the member client does: expired or a new coordinator

    # -- rounds --------------------------------------------------------------------------------------------

    def rounds_until_stopped(self):
        """One outer step's synchronisation every round_s, as the earlier version of this script made it: ask
        for a quorum at this step, then vote ok with the hash every member agrees on and wait for the
        decision. Round 0 only forms the start quorum (a run's members start from the same parameters:
        nothing to commit yet). A refusal or a lost connection ends this member's rounds (it is counted)."""
        step = 0
        while not self.stop.is_set():
            quorum = self.long_poll("/v1/quorum", {"step": step})
            if quorum is None:
                return
            self.quorums.append((time.perf_counter(), quorum["quorum_id"], step, len(quorum["members"])))
            if step > 0:
                decision = self.long_poll("/v1/commit", {"quorum_id": quorum["quorum_id"], "step": step, "ok": True,
                                                         "hash": f"h{step}"})
                if decision is None:
                    return
                self.decisions.append((time.perf_counter(), quorum["quorum_id"], step, decision["outcome"]))
            step += STEPS_PER_ROUND
            self.stop.wait(self.round_s)

    def long_poll(self, path, fields):
        """A request the coordinator holds up to wait_s, asked again while it answers 202 (not yet), as the
        member client's long_poll; None when the load stops first."""
        while not self.stop.is_set():
            status, answer = self.signed_post(path, {**fields, "wait_s": LONG_POLL_WAIT_S},
                                              timeout=LONG_POLL_WAIT_S + REQUEST_TIMEOUT_S)
            if status == 200:
                return answer
        return None


# ---------------------------------------------------------------------------------------------------------
# One measured load.

def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values))) - 1))]


def start_members(coordinator, count, load, stop):
    members = [Member(i, coordinator, load, stop) for i in range(count)]
    for member in members:
        member.start()
    deadline = time.monotonic() + JOIN_TIMEOUT_S + REQUEST_TIMEOUT_S
    for member in members:
        member.joined.wait(max(0.0, deadline - time.monotonic()))
    not_joined = [m.name_in_run for m in members if m.session is None]
    if not_joined:
        raise RuntimeError(f"{len(not_joined)} members did not join: "
                           f"{next((m.first_error for m in members if m.first_error), 'no error recorded')}")
    return members


def stop_members(members, stop):
    """Stops the load and waits for every member's threads; a round's long poll may take its whole wait first
    (its quorum or decision cannot come once the others stopped)."""
    stop.set()
    deadline = time.monotonic() + LONG_POLL_WAIT_S + REQUEST_TIMEOUT_S + 1
    for member in members:
        member.join(max(0.0, deadline - time.monotonic()))


def measure_window(coordinator, seconds):
    """CPU of the coordinator and of this process over `seconds` of load; memory at both ends."""
    began, cpu0, own0 = time.perf_counter(), cpu_seconds(coordinator.pid), os.times()
    memory_before = memory(coordinator.pid)
    time.sleep(seconds)
    ended, cpu1, own1 = time.perf_counter(), cpu_seconds(coordinator.pid), os.times()
    wall = ended - began
    return {"began": began, "ended": ended, "wall_s": wall,
            "coordinator_cpu_pct": 100 * (cpu1 - cpu0) / wall,
            "generator_cpu_pct": 100 * ((own1.user - own0.user) + (own1.system - own0.system)) / wall,
            "rss_at_start_mib": memory_before["rss_mib"], "memory": memory(coordinator.pid)}


def in_window(window, t):
    return window["began"] <= t < window["ended"]


def request_figures(members, window):
    """Answered requests of every kind sent inside the window: in all and per path, per second."""
    sent = collections.Counter(path for m in members for began, path, _, _ in m.requests if in_window(window, began))
    return {"in_window": sum(sent.values()), "per_s": sum(sent.values()) / window["wall_s"],
            "per_s_by_path": {path: count / window["wall_s"] for path, count in sent.most_common()}}


def heartbeat_figures(members, window):
    """Round trips, counts and sizes of the heartbeats sent inside the window."""
    inside = [r for m in members for r in m.requests if r[1] == "/v1/heartbeat" and in_window(window, r[0])]
    trips = sorted(1000 * r[2] for r in inside)
    return {"sent_in_window": len(inside), "per_s": len(inside) / window["wall_s"],
            "sent_total": sum(m.beats_sent for m in members),  # warm-up and after too, errors included
            "mean_body_bytes": sum(r[3] for r in inside) / len(inside) if inside else 0,
            "max_body_bytes": max((r[3] for r in inside), default=0),
            "round_trip_ms": {"p50": percentile(trips, 0.5), "p90": percentile(trips, 0.9),
                              "p99": percentile(trips, 0.99), "max": trips[-1] if trips else None}}


def round_figures(members, window):
    """Quorums formed and outer steps decided inside the window, from the members' answers: one per
    (quorum id, step), however many members were told (a quorum of the same members keeps its id)."""
    quorums = {(q, step) for m in members for t, q, step, _ in m.quorums if in_window(window, t)}
    sizes = [size for m in members for t, _, _, size in m.quorums if in_window(window, t)]
    decided = collections.defaultdict(set)
    for m in members:
        for t, q, step, outcome in m.decisions:
            if in_window(window, t):
                decided[outcome].add((q, step))
    return {"quorums_formed": len(quorums), "commits": len(decided["commit"]), "aborts": len(decided["abort"]),
            "quorum_members_min": min(sizes, default=None), "quorum_members_max": max(sizes, default=None)}


def error_figures(members):
    """Every refusal or error a member met over the whole run, by kind; joins retried and rejoins."""
    errors = collections.Counter()
    for m in members:
        errors.update(m.errors)
    return {"by_kind": dict(errors), "count": sum(errors.values()),
            "first": next((str(m.first_error) for m in members if m.first_error), None),
            "join_retries": sum(m.join_retries for m in members), "rejoins": sum(m.rejoins for m in members)}


def timed_get(coordinator, path, repeats=5):
    """Median and slowest time of `repeats` GETs with the status token, the size of the answer."""
    token = status_token(coordinator.secret, RUN_ID)
    answers = [get(coordinator.port, path, token) for _ in range(repeats)]
    status, body = answers[-1][0], answers[-1][1]
    times = sorted(1000 * a[2] for a in answers)
    result = {"http_status": status, "bytes": len(body), "median_ms": times[len(times) // 2], "max_ms": times[-1]}
    if path == "/status" and status == 200:  # the token must give the full status: one entry per member
        members = json.loads(body).get("members")
        result["members_listed"] = len(members) if isinstance(members, list) else None
    return result


def run_load(args, metrics_per_beat, report_every):
    """Starts a coordinator, its members, warms up, measures, queries /status and /history, cleans up."""
    load = {"metrics_per_beat": metrics_per_beat, "report_every": report_every, "round_s": args.round_s}
    with tempfile.TemporaryDirectory(prefix="coordinator-load-") as workdir:
        coordinator = CoordinatorProcess(args.loco, workdir, args.members, args.heartbeat_timeout_s)
        stop = threading.Event()
        members = []
        try:
            members = start_members(coordinator, args.members, load, stop)
            time.sleep(args.warmup)  # joins, the start quorum, first connections, the first allocations
            window = measure_window(coordinator, args.seconds)
            stop_members(members, stop)
            # After the load (the members did not leave, so the status lists them all and what they sent).
            status = timed_get(coordinator, "/status")
            history = timed_get(coordinator, "/history?after=0")
            final_memory = memory(coordinator.pid)
            refusals_logged = coordinator.refusals_logged()
        finally:
            stop.set()
            coordinator.stop()
    return {**load, "heartbeat_interval_s": members[0].interval_s, "window_s": window["wall_s"],
            "coordinator_cpu_pct_of_one_core": window["coordinator_cpu_pct"],
            "generator_cpu_pct_of_one_core": window["generator_cpu_pct"],
            "rss_at_window_start_mib": window["rss_at_start_mib"],
            "rss_at_window_end_mib": window["memory"]["rss_mib"],
            "peak_rss_mib": final_memory["peak_rss_mib"], "final_rss_mib": final_memory["rss_mib"],
            "coordinator_threads_at_window_end": window["memory"]["threads"],
            "requests": request_figures(members, window), "heartbeats": heartbeat_figures(members, window),
            "rounds": round_figures(members, window), "errors": error_figures(members),
            "refusals_in_coordinator_log": refusals_logged, "status": status, "history": history}


# ---------------------------------------------------------------------------------------------------------
# Where it ran, and the report.

def machine():
    model = "unknown"
    try:
        model = re.search(r"^model name\s*:\s*(.+)$", open("/proc/cpuinfo").read(), re.M)[1]
    except (OSError, TypeError):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "load_average_at_start": os.getloadavg()}


def binary(loco):
    """The binary's path, size and time, and the commit of the git tree it sits in (its source, when it was
    built from that tree: a build from uncommitted changes says so)."""
    path = os.path.realpath(loco)
    info = {"path": path, "mtime": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(path)))}
    with open(path, "rb") as f:
        info["sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
    git = ["git", "-C", os.path.dirname(path)]
    try:
        info["git_commit"] = subprocess.run(git + ["rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                                            timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        info["git_tree_dirty"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    return info


def label(run):
    if not run["metrics_per_beat"]:
        return "no metrics (K=0)"
    return f"metrics K={run['metrics_per_beat']} every {run['report_every']}"


def rows(run):
    """The figures of one run as (label, text) rows, in the order printed."""
    r, h, q, e = run["requests"], run["heartbeats"], run["rounds"], run["errors"]
    ms = lambda v: "-" if v is None else f"{v:.2f}"
    served = lambda g: (f"{g['median_ms']:.2f} ms (max {g['max_ms']:.2f}), {g['bytes']:,} B"
                        if g["http_status"] == 200 else ("not served" if g["http_status"] == 404
                                                         else f"HTTP {g['http_status']}"))
    kinds = ", ".join(f"{path.rsplit('/', 1)[-1]} {per_s:.0f}" for path, per_s in r["per_s_by_path"].items())
    if not run["round_s"]:
        rounds, quorum_members = "no rounds (--round-s 0)", "-"
    else:
        rounds = f"{q['quorums_formed']} / {q['commits']} / {q['aborts']}"
        quorum_members = "-" if q["quorum_members_min"] is None else (
            str(q["quorum_members_min"]) if q["quorum_members_min"] == q["quorum_members_max"]
            else f"{q['quorum_members_min']}-{q['quorum_members_max']}")
    return [
        ("requests/s, all kinds", f"{r['per_s']:.0f} ({kinds})"),
        ("quorums formed / commits / aborts", rounds),
        ("members in a quorum", quorum_members),
        ("coordinator CPU (% of one core)", f"{run['coordinator_cpu_pct_of_one_core']:.1f}"),
        ("peak RSS (VmHWM, MiB)", f"{run['peak_rss_mib']:.1f}"),
        ("RSS window start -> end (MiB)", f"{run['rss_at_window_start_mib']:.1f} -> {run['rss_at_window_end_mib']:.1f}"),
        ("final RSS (VmRSS, MiB)", f"{run['final_rss_mib']:.1f}"),
        ("coordinator threads", str(run["coordinator_threads_at_window_end"])),
        ("heartbeats: window (per s), run", f"{h['sent_in_window']:,} ({h['per_s']:.0f}/s), {h['sent_total']:,}"),
        ("heartbeat body, mean/max (B)", f"{h['mean_body_bytes']:,.0f} / {h['max_body_bytes']:,}"),
        ("heartbeat round trip p50 (ms)", ms(h["round_trip_ms"]["p50"])),
        ("heartbeat round trip p90 (ms)", ms(h["round_trip_ms"]["p90"])),
        ("heartbeat round trip p99 (ms)", ms(h["round_trip_ms"]["p99"])),
        ("heartbeat round trip max (ms)", ms(h["round_trip_ms"]["max"])),
        ("refusals/errors (must be 0)", f"{e['count']} {e['by_kind'] or ''}".strip()),
        ("refusals in coordinator log", str(run["refusals_in_coordinator_log"])),
        ("join retries / rejoins", f"{e['join_retries']} / {e['rejoins']}"),
        ("GET /status (token)", served(run["status"])),
        ("GET /history?after=0", served(run["history"])),
        ("load generator CPU (% of a core)", f"{run['generator_cpu_pct_of_one_core']:.1f}"),
    ]


def print_header(args, where, loco):
    print("coordinator load benchmark (bench/coordinator_load.py, issue 37)")
    print(f"machine: {where['cpu']}, {where['cores']} cores; load average at start "
          f"{' '.join(f'{x:.2f}' for x in where['load_average_at_start'])}")
    commit = loco.get("git_commit") or "unknown"
    if loco.get("git_tree_dirty"):
        commit += " (tree has uncommitted changes)"
    print(f"loco: {loco['path']} (built {loco['mtime']}, sha256 {loco['sha256']}); git HEAD of its tree: {commit}")
    rounds = f"a quorum and a commit every {args.round_s:g} s" if args.round_s else "no quorum rounds"
    print(f"settings: {args.members} members, {rounds}, warm-up {args.warmup:g} s, window {args.seconds:g} s, "
          f"heartbeat timeout {args.heartbeat_timeout_s:g} s")


def print_run(run):
    rounds = f", a round every {run['round_s']:g} s" if run["round_s"] else ""
    print(f"\n{label(run)}: heartbeat every {run['heartbeat_interval_s']:g} s (the join's answer){rounds}, "
          f"window {run['window_s']:.1f} s")
    for name, value in rows(run):
        print(f"  {name:<34} {value}")
    if run["errors"]["first"]:
        print(f"  first error: {run['errors']['first']}")


def print_comparison(before, after):
    left, right = label(before), label(after)
    width = max(len(text) for text in [left, right] + [value for run in (before, after) for _, value in rows(run)])
    print(f"\n| {'':<34} | {left:<{width}} | {right:<{width}} |")
    print(f"|{'-' * 36}|{'-' * (width + 2)}|{'-' * (width + 2)}|")
    for (name, a), (_, b) in zip(rows(before), rows(after)):
        print(f"| {name:<34} | {a:<{width}} | {b:<{width}} |")
    for run in (before, after):
        if run["errors"]["first"]:
            print(f"first error ({label(run)}): {run['errors']['first']}")


# ---------------------------------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loco", default=os.path.join(ROOT, "build", "loco"), help="the loco binary (build/loco)")
    p.add_argument("--members", type=int, default=32, help="simulated members (32)")
    p.add_argument("--seconds", type=float, default=20, help="measured window (20 s)")
    p.add_argument("--warmup", type=float, default=2, help="load before the window, not measured (2 s)")
    p.add_argument("--metrics-per-beat", type=int, default=None,
                   help="K: metrics points in a heartbeat that carries them (0; with --compare 1)")
    p.add_argument("--report-every", type=int, default=1, help="B: only every B-th heartbeat carries metrics (1)")
    p.add_argument("--round-s", type=float, default=2,
                   help="ROUND_S: every member asks for a quorum and votes every ROUND_S s (2; 0: heartbeats only)")
    p.add_argument("--heartbeat-timeout-s", type=float, default=3, help="the coordinator's (its default, 3)")
    p.add_argument("--compare", action="store_true",
                   help="run K = 0, then K (the same rounds), and print them side by side")
    p.add_argument("--json", metavar="PATH", help="write every figure as JSON to PATH")
    args = p.parse_args()
    if args.metrics_per_beat is None:
        args.metrics_per_beat = 1 if args.compare else 0
    if (args.members < 1 or args.seconds <= 0 or args.warmup < 0 or args.report_every < 1
            or args.metrics_per_beat < 0 or args.round_s < 0):
        p.error("--members and --report-every must be at least 1, --seconds positive, --warmup, --round-s and "
                "--metrics-per-beat at least 0")
    if args.compare and args.metrics_per_beat == 0:
        p.error("--compare measures K = 0 against a K of at least 1 (--metrics-per-beat)")
    if not os.access(args.loco, os.X_OK):
        p.error(f"--loco {args.loco} is not an executable (build it: cmake --build build)")
    # A body over the coordinator's limit would be refused (413) at every beat: say so before starting.
    log = MetricsLog(0)
    log.step = 10 ** 6  # points late in a run: the longest numbers
    largest = len(json.dumps({"member_id": "load-00000#0", "incarnation": 2 ** 63, "seq": 2 ** 20,
                              "metrics": log.points(args.metrics_per_beat)}, separators=(",", ":")))
    if largest > MAX_MESSAGE_BYTES:
        p.error(f"a heartbeat with {args.metrics_per_beat} metrics points is about {largest:,} bytes, over the "
                f"coordinator's {MAX_MESSAGE_BYTES:,}-byte limit (it would answer 413)")
    return args


def on_alarm(signum, frame):
    raise TimeoutError("the benchmark ran past its time limit")


def main():
    args = parse_args()
    # A bound on the whole run: each load's stages have their own limits; this catches anything else. The
    # handlers raise, so the try/finally around each coordinator stops it whatever ends the run.
    loads = 2 if args.compare else 1
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    stopping_s = LONG_POLL_WAIT_S + REQUEST_TIMEOUT_S + 1  # stop_members' wait for a round's long poll
    signal.alarm(int(loads * (START_TIMEOUT_S + JOIN_TIMEOUT_S + args.warmup + args.seconds + stopping_s + 60)))
    where, loco = machine(), binary(args.loco)
    print_header(args, where, loco)
    sys.stdout.flush()
    settings = [(0, 1), (args.metrics_per_beat, args.report_every)] if args.compare else \
        [(args.metrics_per_beat, args.report_every)]
    runs = []
    for metrics_per_beat, report_every in settings:
        runs.append(run_load(args, metrics_per_beat, report_every))
        print_run(runs[-1])
        sys.stdout.flush()
    signal.alarm(0)
    if args.compare:
        print_comparison(*runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "bench/coordinator_load.py", "machine": where, "loco": loco,
                       "settings": {k: v for k, v in vars(args).items() if k != "json"}, "runs": runs}, f, indent=2)
    failed = sum(r["errors"]["count"] + r["refusals_in_coordinator_log"] for r in runs)
    if failed:
        print(f"\nFAILED: {failed} refusals or errors (a member must be refused nothing)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
