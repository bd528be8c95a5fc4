#!/usr/bin/env python3
"""Charts of loco runs: training and validation loss against tokens and against wall clock.

    scripts/plot_runs.py OUT.png RUN_DIR [RUN_DIR ...]

Reads RUN_DIR/metrics.jsonl of each run (one curve per run, labelled by the directory name) and
draws a 2x2 PNG with gnuplot (Debian's gnuplot-nox): loss and eval loss against tokens and against
elapsed seconds. Every run has its own colour and marker (scripts/chart_style.py); more than eight runs
are split, in the order given, into groups of eight, each group a row of its own. The membership events of an elastic member (its RUN_DIR is
OUT_DIR/members/NAME-n; docs/fault-tolerance.md "Metrics") are marked by dashed vertical lines at the
line that reports them, labelled with their kind (heal, abort, rejoin, presumed_commit, skip, and quorum
changes after the first). Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chart_style  # noqa: E402


def read_metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                sys.exit(f"plot_runs: {path}:{number} is not JSON (a torn last line? re-run or trim it)")
    if not rows:
        sys.exit(f"plot_runs: {path} has no records")
    return rows


EVENT_COLOURS = {"heal": "#2ca02c", "abort": "#d62728", "rejoin": "#9467bd", "presumed_commit": "#ff7f0e",
                 "skip": "#8c564b", "quorum": "#7f7f7f"}


def membership_marks(rows):
    """(tokens, elapsed_s, kind) of each membership event worth marking, at the line that reports it."""
    marks = []
    for r in rows:
        for e in r.get("membership_events", []):
            if e["kind"] == "quorum" and e["step"] == 0:
                continue  # the run's first quorum
            marks.append((r["tokens"], r["elapsed_s"], e["kind"]))
    return marks


def marks_script(marks, x_index):
    """gnuplot lines marking the events; events at the same x share one line and one label."""
    kinds_at = {}
    for m in marks:
        kinds = kinds_at.setdefault(m[x_index], [])
        if m[2] not in kinds:
            kinds.append(m[2])
    lines = []
    for x, kinds in sorted(kinds_at.items()):
        main = next((k for k in kinds if k != "quorum"), kinds[0])  # the line takes the notable kind's colour
        colour = EVENT_COLOURS.get(main, "#000000")
        lines.append(f"set arrow from {x}, graph 0 to {x}, graph 1 nohead dt 2 lc rgb '{colour}'")
        lines.append(f"set label '{', '.join(kinds)}' at {x}, graph 0.97 rotate by 90 right font ',8' "
                     f"tc rgb '{colour}'")
    return lines


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as work:
        series = []
        marks = []
        for i, run in enumerate(runs):
            rows = read_metrics(run)
            marks += membership_marks(rows)
            data = os.path.join(work, f"run{i}.dat")
            with open(data, "w") as f:
                for r in rows:
                    f.write(f"{r['tokens']} {r['elapsed_s']} {r['loss']} {r.get('eval_loss', 'NaN')}\n")
            series.append((data, os.path.basename(os.path.normpath(run))))
        groups = chart_style.chunks(series)

        def plot(group, x_column, y_column, points):
            kind = "linespoints" if points else "lines"
            return "plot " + ", ".join(
                f"{chart_style.quote(d)} using {x_column}:{y_column} with {kind} {chart_style.style(i, points)} "
                f"title {chart_style.quote(name)}" for i, (d, name) in enumerate(group))

        panels = []
        for group in groups:
            panels += [
                "unset arrow", "unset label", *marks_script(marks, 0),
                "set xlabel 'tokens'", "set ylabel 'training loss (nats/token)'", plot(group, 1, 3, False),
                "set xlabel 'tokens'", "set ylabel 'validation loss (nats/token)'", plot(group, 1, 4, True),
                "unset arrow", "unset label", *marks_script(marks, 1),
                "set xlabel 'elapsed (s)'", "set ylabel 'training loss (nats/token)'", plot(group, 2, 3, False),
                "set xlabel 'elapsed (s)'", "set ylabel 'validation loss (nats/token)'", plot(group, 2, 4, True)]
        script = "\n".join([
            f"set terminal pngcairo size 1400,{1000 * len(groups)}",
            f"set output {chart_style.quote(out)}",
            f"set multiplot layout {2 * len(groups)},2 title 'loco runs'",
            "set termoption noenhanced",
            "set grid",
            "set key font ',9'",
            "set format x '%.1s%c'",
            "set datafile missing 'NaN'",
            *panels,
            "unset multiplot",
        ])
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
        except FileNotFoundError:
            sys.exit("plot_runs: gnuplot is not installed (apt-get install gnuplot-nox)")
    print(f"plot_runs: wrote {out}")


if __name__ == "__main__":
    main()
