#!/usr/bin/env python3
"""Elastic DiLoCo (or data parallel, --algorithm ddp) under seeded faults (docs/fault-tolerance.md "Chaos
runs"); run it through bench/chaos.sh.

Runs the same elastic training without faults once, then once per seed with FAULTS faults at seeded
exponential intervals (mean MEAN_S, counted from the first quorum): kill -9 of a random rank (the
launcher starts it again as a new member, which heals), SIGSTOP of a random rank for STOP_S seconds (it is
expired, fenced out, continued, rejoins and heals), and at most one restart of the coordinator (SIGKILL,
a replacement on the same ports one second later). Each run: `loco launch --elastic --nproc RANKS` on
bench/configs/tiny-150k.toml and data/brown, with a `loco coordinator` of its own (--coordinator
separate) or the launcher's (--coordinator launcher). Prints one JSON object per seed: the faults
injected, whether the run completed, commits and aborts (from the coordinators' logs), committed outer
steps lost, how long survivors waited at the first synchronisation after each fault, heal times, goodput
(kept training per second against the fault-free run's; below), the final validation loss of both runs,
and whether every
member ended with the same global parameters; then a summary line when there are several seeds.

With --churn the ranks play a dist.churn schedule instead (docs/fault-tolerance.md "Simulated churn": the
same schedule that replicas as threads of one process take with dist.backend=local): 'random' plays
random:SEED:FAULTS for each seed, anything else is the schedule itself. Its leaves are kill -9s, its stalls
pause a rank's heartbeats and training; the faults are then counted from the ranks' logs, without times.

Goodput: the inner steps whose work a commit kept (each commit of a quorum of n members at step S keeps
n - h rounds of H steps, h = the members that healed at S and contributed nothing), per second of the
run's wall time, over the same for the fault-free run. Work lost to a fault (a killed member's round, the
survivors' waits, a restarted member's start-up) lowers it; a plain wall-time ratio would not see that a
healed member skips the steps it missed. The wall-time ratio is printed too.

With --rate RATE every rank runs in a network namespace of its own with a link shaped to RATE both ways
(scripts/netns_run.sh --host-address; root only): one `loco launch --elastic --nproc 1` per namespace
restarts its rank, and the ranks reach the coordinator on the host across their shaped links. With
--paired each seed gets a fault-free run of its own just before its chaos run, and its goodput is taken
against that one: on a shared machine the speed drifts over minutes, and a pair measured together drifts
less.

Bounded: each run is killed after LIMIT_S; every process it started is killed at the end. Signals go
only to processes this script started (the launcher's children, by pid).
"""
import argparse
import glob
import hashlib
import json
import os
import platform
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "chaos-benchmark-run-secret"  # the run's secret, for the coordinators and the ranks (docs/security.md)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--faults", type=int, default=3)
    p.add_argument("--mean-s", type=float, default=15.0, help="mean interval between faults")
    p.add_argument("--seeds", default="1", help="a seed, or a range A-B: one chaos run per seed, one clean run")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--ranks", type=int, default=3)
    p.add_argument("--sync-every", type=int, default=10, help="H")
    p.add_argument("--algorithm", choices=("diloco", "ddp"), default="diloco",
                   help="ddp: a quorum and a commit every step (H is then 1)")
    p.add_argument("--kinds", default="kill", help="comma-separated: kill, stop, coordinator")
    p.add_argument("--churn", help="instead of faults by time: a dist.churn schedule the ranks play (explicit, or "
                                    "'random' for random:SEED:FAULTS per seed; docs/fault-tolerance.md)")
    p.add_argument("--stop-s", type=float, default=4.0, help="how long a stopped rank stays stopped")
    p.add_argument("--coordinator", choices=("separate", "launcher"), default="separate",
                   help="a `loco coordinator` process of its own (it can be restarted), or the one `loco launch "
                        "--elastic` serves, which learns of a rank's death at once")
    p.add_argument("--min-replicas", type=int, default=2)
    p.add_argument("--heartbeat-timeout-s", type=float, default=2.0)
    p.add_argument("--join-window-s", type=float, default=1.0)
    p.add_argument("--limit-s", type=float, default=900.0, help="each run is killed after this")
    p.add_argument("--loco", default=os.environ.get("LOCO", os.path.join(ROOT, "build", "loco")))
    p.add_argument("--keep", help="keep the runs' directories here")
    p.add_argument("--rate", help="shape every rank's link to this rate (tc units: 20mbit, 1gbit) in a network "
                                  "namespace of its own (scripts/netns_run.sh; needs root)")
    p.add_argument("--paired", action="store_true", help="a fault-free run before each seed's chaos run, which "
                                                         "that seed's goodput is taken against")
    args = p.parse_args()
    args.kinds = args.kinds.split(",")
    if args.algorithm == "ddp":
        args.sync_every = 1
    if args.churn and args.kinds != ["kill"]:
        p.error("--churn replaces --kinds: the schedule says which faults happen")
    if args.coordinator == "launcher" and "coordinator" in args.kinds:
        p.error("--kinds coordinator needs --coordinator separate (the launcher's coordinator dies with the launcher)")
    if args.rate and args.coordinator != "separate":
        p.error("--rate needs --coordinator separate (the ranks reach it across their links)")
    first, _, last = args.seeds.partition("-")
    args.seeds = list(range(int(first), int(last or first) + 1))
    for kind in args.kinds:
        if kind not in ("kill", "stop", "coordinator"):
            p.error(f"--kinds: '{kind}' is not kill, stop or coordinator")
    if not os.path.exists(os.path.join(ROOT, "data", "brown", "meta.json")):
        sys.exit("chaos: prepare data/brown first (scripts/quickstart.sh does)")
    return args


class Coordinator:
    """A `loco coordinator` process; a replacement keeps the ports and the run id."""

    def __init__(self, args, run_id, log, port=0, store_port=0):
        self.log = open(log, "a")
        self.process = subprocess.Popen(
            # Ranks in network namespaces (--rate) reach it on the host's bridge address.
            [args.loco, "coordinator", "--host", "0.0.0.0" if args.rate else "127.0.0.1", "--port", str(port), "--store-port", str(store_port),
             "--run-id", run_id, "--min-replicas", str(args.min_replicas), "--start-replicas", str(args.ranks), "--heartbeat-timeout-s",
             str(args.heartbeat_timeout_s), "--join-window-s", str(args.join_window_s)],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=dict(os.environ, LOCO_RUN_SECRET=SECRET))
        banner = self.process.stdout.readline()
        found = re.search(r"[0-9.]+:(\d+) .*store on port (\d+)", banner)
        if not found:
            sys.exit(f"chaos: the coordinator did not start: {banner!r} (log {log})")
        self.port, self.store_port = int(found[1]), int(found[2])
        threading.Thread(target=lambda: [self.log.write(line) for line in self.process.stdout], daemon=True).start()

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def children():
    """Each process's children, from /proc."""
    of = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        of.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    return of


def rank_processes(launcher):
    """The training processes: the children of `loco launch`, which is the process we started or, with
    --rate, one per namespace below scripts/netns_run.sh."""
    of = children()
    found, frontier = [], [launcher.pid]
    while frontier:
        pid = frontier.pop()
        try:
            command = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"launch" in command[1:2]:
            found += of.get(pid, [])
        else:
            frontier += of.get(pid, [])
    return sorted(found)


def launch_command(args, coordinator, restarts, rules, train):
    """`loco launch --elastic` of the ranks (RULES: its coordinator's options); with --rate, one per shaped
    network namespace, each with one rank, all of the separate coordinator's run."""
    if not args.rate:
        return [args.loco, "launch", "--elastic", "--nproc", str(args.ranks), "--max-restarts", str(restarts),
                *rules, "--", *train]
    node = ('LOCO_COORDINATOR="$NETNS_HOST_ADDR:$1" exec "$2" launch --elastic --nproc 1 --nnodes "$3" '
            '--node-rank "$RANK" --master-port 29500 --max-restarts "$4" -- "${@:5}"')
    return [os.path.join(ROOT, "scripts", "netns_run.sh"), "--nproc", str(args.ranks), "--rate", args.rate,
            "--host-address", "--", "bash", "-c", node, "node", str(coordinator.port), args.loco, str(args.ranks),
            str(restarts), *train]


def run(args, work, name, faults, seed):
    """One run; returns what it measured."""
    out_dir = os.path.join(work, name)
    run_id = f"chaos-{seed}-{name}"
    environment = dict(os.environ, LOCO_RUN_ID=run_id, LOCO_RUN_SECRET=SECRET)
    coordinators = []
    rules = []
    if args.coordinator == "separate":
        coordinators.append(Coordinator(args, run_id, os.path.join(work, f"{name}.coordinator.log")))
        environment["LOCO_COORDINATOR"] = f"127.0.0.1:{coordinators[0].port}"
    else:
        rules = ["--min-replicas", str(args.min_replicas), "--heartbeat-timeout-s", str(args.heartbeat_timeout_s),
                 "--join-window-s", str(args.join_window_s)]
    log_path = os.path.join(work, f"{name}.log")
    log = open(log_path, "w")
    # With --churn the ranks play the schedule themselves (each leave is a kill -9 the launcher restarts).
    schedule = (f"random:{seed}:{args.faults}" if args.churn == "random" else args.churn) if args.churn and faults else ""
    churn = ["--set", f"dist.churn={schedule}"] if schedule else []
    restarts = faults if not schedule else 2 * args.ranks + faults
    start = time.time()
    train = ["train", "--config", os.path.join(ROOT, "bench/configs/tiny-150k.toml"), "--set",
             f"data.dir={ROOT}/data/brown", "--set", f"train.out_dir={out_dir}", "--set", f"train.steps={args.steps}",
             "--set", "train.batch_size=8", "--set", "train.eval_every=0", "--set", "train.eval_batches=8", "--set",
             "train.log_every=10", "--set", "train.threads=1", "--set", "dist.elastic=true", "--set",
             f"dist.algorithm={args.algorithm}", "--set", "dist.backend=gloo", "--set", "dist.batch=per_replica",
             "--set", f"dist.replicas={args.ranks}", "--set", f"diloco.sync_every={args.sync_every}", "--set",
             "comm.timeout_s=120", *churn]
    launcher = subprocess.Popen(launch_command(args, coordinators[0] if coordinators else None, restarts, rules, train),
                                stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True)
    injected = []
    done = threading.Event()

    def inject():
        rng = random.Random(seed)
        coordinator_restarted = False
        # The clock of the faults starts with training: the first quorum (start-up takes seconds here).
        while not done.is_set() and "elastic: quorum q1 " not in open(log_path).read():
            time.sleep(0.2)
        while len(injected) < faults and not done.is_set():
            if done.wait(rng.expovariate(1 / args.mean_s)):
                return
            kinds = [k for k in args.kinds if k != "coordinator" or not coordinator_restarted]
            kind = rng.choice(kinds)
            if kind == "coordinator":
                coordinator_restarted = True
                at = time.time()
                old = coordinators[-1]
                old.kill()
                time.sleep(1.0)  # a replacement takes a moment to appear
                coordinators.append(Coordinator(args, run_id, os.path.join(work, f"{name}.coordinator.log"),
                                                old.port, old.store_port))
                injected.append({"kind": kind, "time": at})
                continue
            ranks = rank_processes(launcher)
            if not ranks:
                return
            victim = rng.choice(ranks)
            at = time.time()
            try:
                os.kill(victim, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
            except ProcessLookupError:
                continue
            injected.append({"kind": kind, "time": at, "pid": victim})
            if kind == "stop":
                done.wait(args.stop_s)
                try:
                    os.kill(victim, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    injector = threading.Thread(target=inject if not schedule else lambda: None, daemon=True)
    injector.start()
    while launcher.poll() is None and time.time() - start < args.limit_s:
        time.sleep(0.5)
    status = launcher.poll()
    if status is None:  # over the limit: scripts/netns_run.sh stops its ranks and removes its links on SIGTERM
        os.killpg(launcher.pid, signal.SIGTERM if args.rate else signal.SIGKILL)
        try:
            status = launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            status = launcher.wait()
    end = time.time()
    done.set()
    injector.join()
    for c in coordinators:
        c.kill()
    return measure(args, work, name, status, start, end, injected)


def global_hash(path):
    """SHA-256 of the global parameters in a final checkpoint: DiLoCo's outer/global, data parallel's model."""
    if path.endswith("model.safetensors"):
        return hashlib.sha256(open(path, "rb").read()).hexdigest()
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    a, b = json.loads(data[8:8 + n])["outer/global"]["data_offsets"]
    return hashlib.sha256(data[8 + n + a:8 + n + b]).hexdigest()


def kept_member_steps(coordinator_log, events, sync_every):
    """Inner steps whose work commits kept: per commit, (quorum members - members healed there) x H."""
    members_of = {}
    kept = 0
    healed_at = {}
    for e in events:
        if e["kind"] == "heal":  # data parallel commits the step after the one a member healed to
            step = e["step"] + (1 if sync_every == 1 else 0)
            healed_at[step] = healed_at.get(step, 0) + 1
    for line in coordinator_log.splitlines():
        quorum = re.match(r"loco coordinator: quorum (q\d+) at step \d+: (.*)", line)
        if quorum:
            members_of[quorum[1]] = len(quorum[2].split(", "))
        commit = re.match(r"loco coordinator: commit (q\d+) step (\d+):", line)
        if commit and commit[1] in members_of:
            kept += (members_of[commit[1]] - healed_at.get(int(commit[2]), 0)) * sync_every
    return kept


def measure(args, work, name, status, start, end, injected):
    log = open(os.path.join(work, f"{name}.log")).read()
    # Every coordinator of the run (a replacement appends) logs each event as a line; the launcher's, to
    # the launcher's log.
    separate = os.path.join(work, f"{name}.coordinator.log")
    coordinator_log = open(separate).read() if os.path.exists(separate) else log
    losses = [float(x) for x in re.findall(r"validation loss ([0-9.]+)", log)]
    members = {}
    for path in glob.glob(os.path.join(work, name, "members", "*", "metrics.jsonl")):
        rows = [json.loads(line) for line in open(path) if line.strip()]
        members[os.path.basename(os.path.dirname(path))] = rows
    finished = {m: rows for m, rows in members.items() if rows and rows[-1]["step"] == args.steps}
    events = [e for rows in members.values() for r in rows for e in r.get("membership_events", [])]
    hashes = {global_hash(p) for p in glob.glob(os.path.join(work, name, "members", "*", "checkpoints",
                                                              f"step_{args.steps}",
                                                              "model.safetensors" if args.algorithm == "ddp"
                                                              else "strategy.safetensors"))}
    kept = kept_member_steps(coordinator_log, events, args.sync_every)
    # A heal that moved a member back loses the outer steps it had committed since (none expected).
    lost = 0
    for e in events:
        if e["kind"] == "heal":
            was, now = map(int, re.search(r"step (\d+) -> (\d+)", e["detail"]).groups())
            lost += max(0, was - now) // args.sync_every
    expected_outer = -(-args.steps // args.sync_every)
    outer = sorted({rows[-1].get("commits" if args.algorithm == "ddp" else "outer_steps") for rows in finished.values()})
    # How long the survivors waited at their first synchronisation after each fault: the quorum wait of
    # the first new quorum after it plus any abort before that.
    waits = []
    for fault in injected:
        after = sorted((e for e in events if e["time"] > fault["time"] and e["kind"] in ("quorum", "abort")),
                       key=lambda e: e["time"])
        first_quorum = next((e for e in after if e["kind"] == "quorum"), None)
        if first_quorum:
            aborts = sum(e["seconds"] for e in after if e["kind"] == "abort" and e["time"] <= first_quorum["time"])
            waits.append(round(first_quorum["seconds"] + aborts, 3))
    return {
        "status": status, "wall_s": round(end - start, 1), "kept_member_steps": kept, "completed": status == 0 and len(finished) >= 1,
        "members_finished": len(finished), "final_loss": round(sum(losses) / len(losses), 4) if losses else None,
        "distinct_final_globals": len(hashes), "commits": coordinator_log.count("loco coordinator: commit "),
        "aborts": coordinator_log.count("loco coordinator: abort "),
        "final_outer_steps": outer, "expected_outer_steps": expected_outer,
        "lost_committed_outer_steps": lost + (max(0, expected_outer - min(outer)) if outer else expected_outer),
        "faults": [{"kind": f["kind"], "at_s": round(f["time"] - start, 1)} for f in injected] +
                  [{"kind": kind, "at_s": None} for kind in re.findall(r"churn: replica \d+ (leaves|stalls)", log)],
        "schedule": (re.findall(r"churn: \S+ drew (.*)", log) or [None])[0],
        "survivor_wait_s": waits,
        "heal_s": [e["seconds"] for e in events if e["kind"] == "heal"],
        "rejoins": sum(1 for e in events if e["kind"] == "rejoin"),
        "presumed_commits": sum(1 for e in events if e["kind"] == "presumed_commit"),
    }


def main():
    args = parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="loco-chaos-")
    os.makedirs(work, exist_ok=True)
    clean = None if args.paired else run(args, work, "clean", 0, 0)
    results = []
    for seed in args.seeds:
        if args.paired:
            clean = run(args, work, f"clean-{seed}", 0, seed)
        chaos = run(args, work, f"chaos-{seed}", args.faults, seed)
        gap = (100 * (chaos["final_loss"] / clean["final_loss"] - 1)
               if chaos["final_loss"] and clean["final_loss"] else None)
        result = {
            "benchmark": f"elastic {args.algorithm} under seeded faults (bench/chaos.sh)",
            "machine": f"{os.cpu_count()} cores, {platform.machine()}", "seed": seed, "steps": args.steps,
            "ranks": args.ranks, "link_rate": args.rate, "paired_clean_run": args.paired,
            "coordinator": args.coordinator, "min_replicas": args.min_replicas, "sync_every": args.sync_every,
            "kinds": args.kinds, "fault_mean_interval_s": args.mean_s,
            "faults_injected": [f["kind"] for f in chaos["faults"]], "fault_times_s": [f["at_s"] for f in chaos["faults"]],
            "churn_schedule": chaos["schedule"],
            "completed": chaos["completed"],
            "commits": {"clean": clean["commits"], "chaos": chaos["commits"]}, "aborts": chaos["aborts"],
            "lost_committed_outer_steps": chaos["lost_committed_outer_steps"],
            "final_outer_steps": chaos["final_outer_steps"],
            "survivor_wait_s": chaos["survivor_wait_s"], "heal_s": chaos["heal_s"], "rejoins": chaos["rejoins"],
            "presumed_commits": chaos["presumed_commits"],
            "wall_s": {"clean": clean["wall_s"], "chaos": chaos["wall_s"]},
            "kept_member_steps": {"clean": clean["kept_member_steps"], "chaos": chaos["kept_member_steps"]},
            "goodput": round((chaos["kept_member_steps"] / chaos["wall_s"]) /
                             (clean["kept_member_steps"] / clean["wall_s"]), 3),
            "wall_time_ratio": round(clean["wall_s"] / chaos["wall_s"], 3),
            "final_loss": {"clean": clean["final_loss"], "chaos": chaos["final_loss"]},
            "loss_gap_pct": round(gap, 2) if gap is not None else None,
            "members_finished": chaos["members_finished"],
            "members_with_identical_globals": chaos["distinct_final_globals"] == 1,
        }
        results.append(result)
        print(json.dumps(result), flush=True)
    if len(results) > 1:
        waits = [w for r in results for w in r["survivor_wait_s"]]
        gaps = [abs(r["loss_gap_pct"]) for r in results if r["loss_gap_pct"] is not None]
        print(json.dumps({
            "summary": f"{len(results)} seeded chaos runs", "seeds": args.seeds,
            "completed": sum(r["completed"] for r in results),
            "identical_globals": sum(r["members_with_identical_globals"] for r in results),
            "faults_injected": sum(len(r["faults_injected"]) for r in results),
            "lost_committed_outer_steps": sum(r["lost_committed_outer_steps"] for r in results),
            "max_loss_gap_pct": max(gaps) if gaps else None,
            "goodput": {"min": min(r["goodput"] for r in results),
                        "mean": round(sum(r["goodput"] for r in results) / len(results), 3)},
            "survivor_wait_s": {"median": sorted(waits)[len(waits) // 2], "max": max(waits)} if waits else None,
        }), flush=True)
    if not args.keep:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
