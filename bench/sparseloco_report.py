#!/usr/bin/env python3
"""Summary of the SparseLoCo benchmark (bench/sparseloco.sh).

    bench/sparseloco_report.py OUT_DIR

OUT_DIR holds CORPUS-sSEED/NAME run directories of bench/convergence.sh. For each corpus, one markdown row
per run of bench/convergence/sparseloco.txt: the final validation loss on the whole validation split
(NAME/final_eval.json) as the mean over the seeds and its spread (max - min), the difference from DiLoCo
fp32 (the run "diloco-fp32") in percent, the bytes replica 0 sent per synchronisation (its final
bytes_sent over the run's synchronisations: every step for DDP, ceil(steps / H) otherwise, the last step
included) and how many times fewer that is than DiLoCo fp32's. Then the density x H map of
bench/convergence/sparseloco_map.txt on Brown, the runs of sparseloco_tuning.txt and sparseloco_long.txt (1,200
steps, OUT_DIR/long-brown-sSEED), and OUT_DIR/sparseloco.png (gnuplot): final loss against
bytes sent per replica over the run, one panel per corpus. Standard library only.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import chart_style  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = "diloco-fp32"


def read_list(name):
    """[(run name, overrides)] of a run list in bench/convergence/."""
    runs = []
    with open(os.path.join(HERE, "convergence", name)) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                words = line.split()
                runs.append((words[0], words[1:]))
    return runs


def syncs(overrides, steps):
    if "dist.algorithm=ddp" in overrides:
        return steps
    h = 30
    for o in overrides:
        m = re.match(r"[a-z]+\.sync_every=(\d+)$", o)
        if m:
            h = int(m.group(1))
    return math.ceil(steps / h)


def result(run_dir, overrides):
    """(final loss, bytes sent by replica 0 in all, bytes per sync), or None when not finished."""
    try:
        with open(os.path.join(run_dir, "final_eval.json")) as f:
            final = json.load(f)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            last = [json.loads(line) for line in f if line.strip()][-1]
    except (OSError, ValueError, IndexError):
        return None
    sent = float(last.get("bytes_sent", 0))
    return final["loss"], sent, sent / syncs(overrides, int(final["step"]))


def gather(out, corpus, runs, seeds="*"):
    """{name: [(loss, sent, per_sync) per seed]} of a corpus (of the seeds the glob `seeds` matches)."""
    found = {}
    for seed_dir in sorted(glob.glob(os.path.join(out, f"{corpus}-s{seeds}"))):
        for name, overrides in runs:
            r = result(os.path.join(seed_dir, name), overrides)
            if r:
                found.setdefault(name, []).append(r)
    return found


def mean(values):
    return sum(values) / len(values)


def table(corpus, found, runs):
    print(f"\n### {corpus}\n")
    print("| run | seeds | final val loss (mean) | spread | vs DiLoCo fp32 | bytes / replica / sync | x fewer than DiLoCo fp32 |")
    print("|---|---|---|---|---|---|---|")
    base = found.get(BASELINE)
    base_loss = mean([r[0] for r in base]) if base else None
    base_sync = mean([r[2] for r in base]) if base else None
    for name, _ in runs:
        if name not in found:
            continue
        rs = found[name]
        loss = mean([r[0] for r in rs])
        spread = max(r[0] for r in rs) - min(r[0] for r in rs)
        per_sync = mean([r[2] for r in rs])
        vs = f"{100 * (loss / base_loss - 1):+.2f}%" if base_loss else "n/a"
        fewer = f"{base_sync / per_sync:.1f}" if base_sync and per_sync > 0 else "n/a"
        print(f"| {name} | {len(rs)} | {loss:.4f} | {spread:.4f} | {vs} | {per_sync:,.0f} | {fewer} |")


def density_map(found):
    cells = {}
    for name, rs in found.items():
        m = re.match(r"sparse-k(\d+)-h(\d+)$", name)
        if m:
            cells[(int(m.group(1)), int(m.group(2)))] = rs
    for k in (48, 64, 128):  # the H = 30 runs of bench/convergence/sparseloco.txt
        if f"sparse-k{k}" in found:
            cells[(k, 30)] = found[f"sparse-k{k}"]
    if not cells:
        return
    ks = sorted({k for k, _ in cells})
    hs = sorted({h for _, h in cells})
    print("\n### Density x H on brown (final val loss, mean over seeds; MB sent per replica over the run)\n")
    print("| k of 4,096 \\ H | " + " | ".join(str(h) for h in hs) + " |")
    print("|---|" + "---|" * len(hs))
    for k in ks:
        row = []
        for h in hs:
            rs = cells.get((k, h))
            row.append(f"{mean([r[0] for r in rs]):.4f} ({mean([r[1] for r in rs]) / 1e6:.2f} MB)" if rs else "")
        print(f"| {k} | " + " | ".join(row) + " |")


def chart(out, per_corpus, runs):
    path = os.path.join(out, "sparseloco.png")
    names = [n for n, _ in runs]
    with tempfile.TemporaryDirectory() as tmp:
        panels = []
        for corpus, found in per_corpus:
            series = []
            for i, name in enumerate(n for n in names if n in found):
                data = os.path.join(tmp, f"{corpus}-{name}.dat")
                with open(data, "w") as f:
                    for loss, sent, _ in found[name]:
                        f.write(f"{sent / 1e6} {loss}\n")
                series.append(f"{chart_style.quote(data)} using 1:2 with points {chart_style.style(i, True, 1.2)} "
                              f"title {chart_style.quote(name)}")
            if series:
                panels.append([f"set title {chart_style.quote(corpus + ': final validation loss against MB sent per replica (each seed a point)')}",
                               "plot " + ", ".join(series)])
        if not panels:
            return
        script = "\n".join([f"set terminal pngcairo size 1500,{520 * len(panels)}",
                            f"set output {chart_style.quote(path)}",
                            f"set multiplot layout {len(panels)},1",
                            "set logscale x", "set xlabel 'MB sent by one replica over the run (log)'",
                            "set ylabel 'final validation loss'", "set key outside right", "set grid"]
                           + [line for panel in panels for line in panel] + ["unset multiplot"])
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
            print(f"\nchart: {path}")
        except FileNotFoundError:
            print("\n(no chart: gnuplot is not installed; apt-get install gnuplot-nox)")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    runs = read_list("sparseloco.txt")
    map_runs = read_list("sparseloco_map.txt")
    tuning_runs = read_list("sparseloco_tuning.txt")
    per_corpus = []
    for corpus in ("brown", "sotu"):
        found = gather(out, corpus, runs + map_runs)
        if found:
            table(corpus, found, runs)
            per_corpus.append((corpus, found))
            if corpus == "brown":
                density_map(found)
                table(corpus + " (map runs)", found, map_runs)
                # Against the first seed's runs of the main list: the tuning runs have that seed only.
                first = sorted(glob.glob(os.path.join(out, "brown-s*")))[0].rsplit("-s", 1)[1]
                table(corpus + f" (seed {first}: eta, beta, every value sent, Local SGD)",
                      gather(out, corpus, runs + tuning_runs, first), runs + tuning_runs)
    long_runs = read_list("sparseloco_long.txt")
    found = gather(out, "long-brown", long_runs)
    if found:
        table("brown, 1,200 steps", found, long_runs)
    chart(out, per_corpus, runs)


if __name__ == "__main__":
    main()
