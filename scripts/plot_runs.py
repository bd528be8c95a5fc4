#!/usr/bin/env python3
"""Charts of loco runs: training and validation loss against tokens and against wall clock.

    scripts/plot_runs.py OUT.png RUN_DIR [RUN_DIR ...]

Reads RUN_DIR/metrics.jsonl of each run (one curve per run, labelled by the directory name) and
draws a 2x2 PNG with gnuplot (Debian's gnuplot-nox): loss and eval loss against tokens and against
elapsed seconds. Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile


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


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as work:
        series = []
        for i, run in enumerate(runs):
            rows = read_metrics(run)
            data = os.path.join(work, f"run{i}.dat")
            with open(data, "w") as f:
                for r in rows:
                    f.write(f"{r['tokens']} {r['elapsed_s']} {r['loss']} {r.get('eval_loss', 'NaN')}\n")
            series.append((data, os.path.basename(os.path.normpath(run))))

        def plot(x_column, y_column, points):
            style = "linespoints pt 7 ps 0.5" if points else "lines"
            return "plot " + ", ".join(
                f"'{d}' using {x_column}:{y_column} with {style} title '{name}'" for d, name in series)

        script = "\n".join([
            "set terminal pngcairo size 1400,1000",
            f"set output '{out}'",
            "set multiplot layout 2,2 title 'loco runs'",
            "set grid",
            "set format x '%.1s%c'",
            "set datafile missing 'NaN'",
            "set xlabel 'tokens'", "set ylabel 'training loss'", plot(1, 3, False),
            "set xlabel 'tokens'", "set ylabel 'validation loss'", plot(1, 4, True),
            "set xlabel 'elapsed (s)'", "set ylabel 'training loss'", plot(2, 3, False),
            "set xlabel 'elapsed (s)'", "set ylabel 'validation loss'", plot(2, 4, True),
            "unset multiplot",
        ])
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
        except FileNotFoundError:
            sys.exit("plot_runs: gnuplot is not installed (apt-get install gnuplot-nox)")
    print(f"plot_runs: wrote {out}")


if __name__ == "__main__":
    main()
