#!/usr/bin/env python3
"""Summary table and charts of a convergence sweep (bench/convergence.sh).

    bench/convergence_report.py OUT_DIR RUN_LIST [BASELINE]

For every run of RUN_LIST that has OUT_DIR/NAME/metrics.jsonl, prints one markdown row: the final
validation loss on the whole validation split (NAME/final_eval.json, `loco eval` of the final
checkpoint; of the parameters a user would deploy: theta_g for DiLoCo and Streaming, replica 0's
slow weights for NoLoCo), its difference from BASELINE's (default: the run named "dp"), bytes sent by
replica 0, the peak bytes sent in any logged interval (10 steps; not the last, where every strategy
syncs everything), and the time the emulated 100 Mbit/s link needs for those bytes (the link model's
ring charge: bytes x 8 / bandwidth). Then draws OUT_DIR/NAME-of-list.png with gnuplot: one row of panels
per group of runs (a line "# panel: TITLE" in RUN_LIST starts a group; without them, groups of seven in
list order), each row validation loss against tokens and against bytes sent and training loss against
tokens, the baseline drawn in every row, every series its own colour and marker (scripts/chart_style.py).
Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import chart_style  # noqa: E402


def read_runs(list_path):
    """The run names of RUN_LIST in order, and their panels: [(title, [names])]."""
    runs, panels = [], []
    with open(list_path) as f:
        for line in f:
            if line.startswith("# panel:"):
                panels.append((line[len("# panel:"):].strip(), []))
            elif line.strip() and not line.startswith("#"):
                runs.append(line.split()[0])
                if panels:
                    panels[-1][1].append(runs[-1])
    return runs, panels


def summarise(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    evals = [r for r in rows if "eval_loss" in r]
    sent = [r.get("bytes_sent", 0) for r in rows]
    # The last interval is left out: every strategy syncs everything at the run's last step.
    peaks = [b - a for a, b in zip([0] + sent, sent)][:-1] or [0]
    strategy = ""
    log = run_dir.rstrip("/") + ".log"
    if os.path.exists(log):
        for line in open(log):
            if line.startswith("strategy: "):
                strategy = line[len("strategy: "):].strip()
    final = evals[-1]["eval_loss"] if evals else float("nan")
    final_eval = os.path.join(run_dir, "final_eval.json")  # the whole validation split (convergence.sh)
    if os.path.exists(final_eval):
        final = json.load(open(final_eval))["loss"]
    return {"rows": rows, "evals": evals, "final": final,
            "sent": sent[-1], "peak": max(peaks), "strategy": strategy}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, list_path = sys.argv[1], sys.argv[2]
    baseline = sys.argv[3] if len(sys.argv) > 3 else "dp"
    listed, panels = read_runs(list_path)
    names = [n for n in listed if os.path.exists(os.path.join(out, n, "metrics.jsonl"))]
    if not names:
        sys.exit(f"convergence_report: no finished runs of {list_path} in {out}")
    runs = {n: summarise(os.path.join(out, n)) for n in names}
    base_path = os.path.join(out, baseline, "metrics.jsonl")
    base = summarise(os.path.join(out, baseline))["final"] if os.path.exists(base_path) else None
    print(f"| run | final val loss | vs {baseline} | MB sent / replica | peak MB / 10 steps | "
          "link time at 100 Mbit/s (s) | strategy |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        r = runs[n]
        rel = f"{100 * (r['final'] - base) / base:+.2f}%" if base else "n/a"
        print(f"| {n} | {r['final']:.4f} | {rel} | {r['sent'] / 1e6:.1f} | {r['peak'] / 1e6:.2f} | "
              f"{r['sent'] * 8 / 100e6:.1f} | {r['strategy']} |")

    chart = os.path.join(out, os.path.splitext(os.path.basename(list_path))[0] + ".png")
    others = [n for n in names if n != baseline]
    if panels:
        groups = [(title, [n for n in members if n in names and n != baseline]) for title, members in panels]
    else:
        groups = [("", chunk) for chunk in chart_style.chunks(others, chart_style.MAX_SERIES - 1)]
    groups = [(title, ([baseline] if baseline in names else []) + members) for title, members in groups if members]
    with tempfile.TemporaryDirectory() as work:
        data = {}
        for i, n in enumerate(names):
            data[n] = os.path.join(work, f"{i}.dat")
            with open(data[n], "w") as f:
                for r in runs[n]["rows"]:
                    f.write(f"{r['tokens']} {r.get('bytes_sent', 0)} {r['loss']} {r.get('eval_loss', 'NaN')}\n")

        def plot(members, x, y=4, points=True):
            kind = "linespoints" if points else "lines"
            return "plot " + ", ".join(
                f"{chart_style.quote(data[n])} using {x}:{y} with {kind} {chart_style.style(i, points, 0.6)} "
                f"title {chart_style.quote(n)}" for i, n in enumerate(members))

        rows = []
        for title, members in groups:
            rows += [f"set title {chart_style.quote(title)}",
                     "unset logscale x", "set xlabel 'tokens'", "set ylabel 'validation loss (nats/token)'",
                     plot(members, 1),
                     "set logscale x", "set xlabel 'bytes sent per replica'", plot(members, 2),
                     "unset logscale x", "set xlabel 'tokens'", "set ylabel 'training loss, replica 0 (nats/token)'",
                     plot(members, 1, 3, False)]
        script = "\n".join([
            f"set terminal pngcairo size 1800,{520 * len(groups)}", f"set output {chart_style.quote(chart)}",
            f"set multiplot layout {len(groups)},3 title 'Brown, loco: loss of the deployed parameters (validation) "
            "and of replica 0 (training)'",
            "set termoption noenhanced", "set grid", "set datafile missing 'NaN'", "set key top right font ',8'",
            "set format x '%.0s%c'", *rows, "unset multiplot"])
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
            print(f"\nchart: {chart}")
        except FileNotFoundError:
            print("\n(no chart: gnuplot is not installed; apt-get install gnuplot-nox)")


if __name__ == "__main__":
    main()
