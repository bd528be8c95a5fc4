#!/usr/bin/env python3
"""Chart of bench/pipeline_links.sh with REPLICAS=2 (docs/results.md, "Pipeline stages"): for each run of
the table, tokens/s of all replicas against one process (left), and a step's seconds split into training
(compute, bubble, activations) and the exposed outer step (right).

    python3 bench/pipeline_chart.py BENCH_OUTPUT.txt docs/pipeline-replicas.png

BENCH_OUTPUT.txt: what the benchmark printed (its markdown table). Needs gnuplot (scripts/setup.sh).
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import chart_style  # noqa: E402


def rows(path):
    """(label, s/step, tokens/s, exposed s/step) per run of the table."""
    found = []
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 10 or not cells[3].replace(".", "", 1).isdigit():
            continue
        run, link, codec, step_s, tokens_s, _, _, _, exposed, _ = cells
        label = "one process" if run == "one process" else f"{run.split(',')[0]}, {link.replace(' Mbit/s', ' Mbit')}"
        found.append((label, float(step_s), float(tokens_s), 0.0 if exposed == "-" else float(exposed)))
    if not found:
        sys.exit(f"{path}: no table rows of bench/pipeline_links.sh (REPLICAS=2) found")
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, out = rows(sys.argv[1]), sys.argv[2]
    if shutil.which("gnuplot") is None:
        sys.exit("no chart: gnuplot is not installed (apt-get install gnuplot-nox)")
    with tempfile.TemporaryDirectory() as tmp:
        table = os.path.join(tmp, "runs.dat")
        with open(table, "w") as f:
            for label, step_s, tokens_s, exposed in data:
                f.write(f"\"{label}\" {tokens_s} {step_s - exposed} {exposed}\n")  # data files quote with "
        q = chart_style.quote
        script = "\n".join([
            "set terminal pngcairo size 1400,520",
            f"set output {q(out)}",
            "set multiplot layout 1,2",
            "set style data histograms",
            "set style histogram clustered gap 0.5",
            "set style fill solid 0.8 border -1",
            "set boxwidth 0.8",
            "set xtics rotate by -30 font ',9'",
            "set grid ytics",
            "set key top left opaque",
            "set offsets 0, 0, graph 0.25, 0",  # headroom for the key
            f"set title {q('tokens/s of all replicas (2 pipeline replicas, 10 Mbit/s between them)')}",
            "set ylabel 'tokens/s'",
            "set yrange [0:*]",
            f"plot {q(table)} using 2:xtic(1) notitle lc rgb '{chart_style.STYLES[2][0]}'",
            "set style histogram rowstacked",
            f"set title {q('seconds per step: training and the exposed outer step')}",
            "set ylabel 's/step'",
            f"plot {q(table)} using 3:xtic(1) title 'training (compute, bubble, activations)' "
            f"lc rgb '{chart_style.STYLES[2][0]}', '' using 4 title 'exposed DiLoCo outer step' "
            f"lc rgb '{chart_style.STYLES[1][0]}'",
            "unset multiplot",
        ])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"chart: {out}")


if __name__ == "__main__":
    main()
