#!/usr/bin/env python3
"""One markdown row of bench/utilisation.sh: a run's time over its window against the baseline's; with
--medians ROWS, the median (and range) of each (ranks, rate, run) over the repeats in ROWS, the rows that
`bench/utilisation.sh --repeats K` printed.

The window is steps (a, b]: a = 5 (start-up left out), b = the run's last step - 1 (the final
synchronisation every strategy makes at its last step left out); with 8 steps (DDP) a = 3.

Where rank 0's window went, from every rank's metrics (rank 0's and replica_R/metrics.jsonl): its compute,
and what it was blocked on communication (comm_s), split in two. At a step where every rank was blocked,
the rank that arrived last waited only for the exchange itself: the least any rank was blocked at that
step is the exchange's exposed time ("exchange s"); the rest of rank 0's blocked time at that step is
waiting for a rank that was behind ("waited s", which on this VM is its processes' unequal speed). So
run s = rank 0's compute + exchange s + waited s. comm_s counts only the training's waits since
loco 55b02a6 (comm::BackgroundWaits); before, Streaming's comm_s held its background exchanges
too, which makes these two columns meaningless for Streaming runs made earlier.
"""
import argparse
import glob
import json
import os
import re
import statistics


def elapsed(metrics_path, key="elapsed_s"):
    """step -> `key` (elapsed_s or comm_s), the last eval loss and the last bytes_sent (or None)."""
    times, loss, sent = {}, None, None
    with open(metrics_path) as f:
        for line in f:
            row = json.loads(line)
            if key in row and "step" in row:
                times[row["step"]] = row[key]
            loss = row.get("eval_loss", loss)
            sent = row.get("bytes_sent", sent)
    return times, loss, sent


def window_seconds(times, first, last):
    missing = [s for s in (first, last) if s not in times]
    if missing:
        raise SystemExit("utilisation_report: steps %s missing from the metrics (train.log_every = 1?)" % missing)
    return times[last] - times[first]


def blocked_split(run_dir, ranks, first, last):
    """(exchange s, waited s) of rank 0 over the window (see the docstring)."""
    paths = [os.path.join(run_dir, "metrics.jsonl")] + [
        os.path.join(run_dir, "replica_%d" % r, "metrics.jsonl") for r in range(1, ranks)]
    blocked = []  # per rank: step -> seconds blocked in that step
    for path in paths:
        comm = elapsed(path, "comm_s")[0]
        blocked.append({s: comm[s] - comm[s - 1] for s in range(first + 1, last + 1) if s in comm and s - 1 in comm})
    exchange = waited = 0.0
    for step, mine in blocked[0].items():
        least = min(b.get(step, 0.0) for b in blocked)
        exchange += least
        waited += mine - least
    return exchange, waited


def medians(rows_path):
    """Rows named "RUN #k" grouped by (ranks, rate, RUN): median utilisation, its range, the repeats."""
    groups = {}
    with open(rows_path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 10 or not cells[0].isdigit():
                continue
            ranks, rate, name = cells[0], cells[1], re.sub(r" #\d+$", "", cells[2])
            groups.setdefault((ranks, rate, name), []).append(float(cells[6].strip("*%")))
    print("| ranks | Mbit/s | run | repeats | median utilisation | range |")
    print("|---|---|---|---|---|---|")
    for (ranks, rate, name), values in groups.items():
        print("| %s | %s | %s | %d | **%.1f%%** | %.1f–%.1f%% |" % (
            ranks, rate, name, len(values), statistics.median(values), min(values), max(values)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--medians", help="rows printed by bench/utilisation.sh --repeats K")
    for key in ("run", "log", "baseline", "name", "rate"):
        p.add_argument("--" + key)
    p.add_argument("--steps", type=int)
    p.add_argument("--ranks", type=int)
    a = p.parse_args()
    if a.medians:
        medians(a.medians)
        return
    missing = [k for k in ("run", "log", "baseline", "name", "rate", "steps", "ranks") if getattr(a, k) is None]
    if missing:
        p.error("missing --" + ", --".join(missing))
    first = 3 if a.steps <= 10 else 5
    last = a.steps - 1
    times, loss, sent = elapsed(os.path.join(a.run, "metrics.jsonl"))
    run_s = window_seconds(times, first, last)
    base = [window_seconds(elapsed(m)[0], first, last)
            for m in sorted(glob.glob(os.path.join(a.baseline, "p*", "metrics.jsonl")))]
    if len(base) != a.ranks:
        raise SystemExit("utilisation_report: %d baseline processes under %s, expected %d" % (len(base), a.baseline, a.ranks))
    base_s = statistics.mean(base)
    with open(a.log, errors="replace") as f:
        log = f.read()
    # τ auto's decisions (rank 0 prints them): the τ each fragment ended with, "fragment 0 / fragment 1".
    settled = {}
    for fragment, tau in re.findall(r"streaming: (?:fragment (\d+)[^:]*: )?tau \d+ -> (\d+)", log):
        settled[fragment] = tau
    if settled:
        tau = " / ".join(settled[k] for k in sorted(settled))
    else:
        tau = "1" if "tau1" in a.name else "–"
    exchange_s, waited_s = blocked_split(a.run, a.ranks, first, last)
    print("| %d | %s | %s | (%d, %d] | %.1f | %.1f | **%.1f%%** | %s | %s | %s | %.1f | %.1f |" % (
        a.ranks, a.rate, a.name, first, last, run_s, base_s, 100 * base_s / run_s,
        "%.1f" % (sent / 1e6) if sent is not None else "–", "%.4f" % loss if loss is not None else "–", tau,
        exchange_s, waited_s), flush=True)


if __name__ == "__main__":
    main()
