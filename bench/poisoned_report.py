#!/usr/bin/env python3
"""Table and chart of the poisoned-replica benchmark (bench/poisoned.sh).

    bench/poisoned_report.py OUT_DIR RUN_LIST [OUTER_STEP_TIMES.jsonl]

Runs are named RULE-ATTACK (bench/convergence/poisoned.txt). Prints, per rule, the final validation loss on
the whole validation split (NAME/final_eval.json) without a bad replica and under each attack, each against
the clean mean run; then, from OUTER_STEP_TIMES (JSON lines of build/loco_outer_step_bench), each rule's
outer step against the mean's. Draws OUT_DIR/poisoned.png: one panel per rule, validation loss against
tokens, one line per attack (colour and marker distinct, the same attack alike in every panel).
Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

ATTACKS = [("clean", "no bad replica"), ("x100", "x100"), ("flip", "sign-flipped"), ("noise", "noise, same norm")]
STYLES = ["lc rgb '#000000' pt 7", "lc rgb '#d62728' pt 5", "lc rgb '#1f77b4' pt 9", "lc rgb '#2ca02c' pt 11"]


def final_loss(run_dir):
    path = os.path.join(run_dir, "final_eval.json")
    return json.load(open(path))["loss"] if os.path.exists(path) else None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, list_path = sys.argv[1], sys.argv[2]
    names = [line.split()[0] for line in open(list_path) if line.strip() and not line.startswith("#")]
    algorithm = "SparseLoCo" if "dist.algorithm=sparseloco" in open(list_path).read() else "DiLoCo"
    rules = []
    for name in names:
        rule = name.rsplit("-", 1)[0]
        if rule not in rules:
            rules.append(rule)
    clean = final_loss(os.path.join(out, "mean-clean"))
    print(f"Final validation loss (whole split) and its change against the clean mean run ({clean:.4f})"
          if clean else "Final validation loss (the clean mean run is missing)")
    print("| rule | " + " | ".join(label for _, label in ATTACKS) + " |")
    print("|---" * (len(ATTACKS) + 1) + "|")
    for rule in rules:
        cells = []
        for attack, _ in ATTACKS:
            loss = final_loss(os.path.join(out, f"{rule}-{attack}"))
            if loss is None:
                cells.append("not run")
            else:
                cells.append(f"{loss:.4f} ({100 * (loss / clean - 1):+.1f}%)" if clean else f"{loss:.4f}")
        print(f"| {rule} | " + " | ".join(cells) + " |")

    if len(sys.argv) > 3 and os.path.exists(sys.argv[3]):
        times = [json.loads(line) for line in open(sys.argv[3]) if line.strip()]
        print("\nOuter step time, 4 replicas as threads (build/loco_outer_step_bench; median of 5):")
        print("| model | parameters | rule | outer step (s) | against the mean's | share of training at H = 30 |")
        print("|---|---|---|---|---|---|")
        for t in times:
            mean = next(m for m in times if m["model"] == t["model"] and m["aggregation"] == "mean")
            print(f"| {t['model']} | {t['parameters']:,} | {t['aggregation']} | {t['outer_step_s']:.3f} | "
                  f"{t['outer_step_s'] / mean['outer_step_s']:.1f}x | {100 * t['outer_fraction_at_H']:.2f}% |")
        print(f"(machine: {times[0]['machine']}; inner step {times[0]['inner_batch']})")

    chart = os.path.join(out, "poisoned.png")
    with tempfile.TemporaryDirectory() as work:
        panels = []
        for rule in rules:
            series = []
            for (attack, label), style in zip(ATTACKS, STYLES):
                metrics = os.path.join(out, f"{rule}-{attack}", "metrics.jsonl")
                if not os.path.exists(metrics):
                    continue
                data = os.path.join(work, f"{rule}-{attack}.dat")
                with open(data, "w") as f:
                    for line in open(metrics):
                        row = json.loads(line)
                        if "eval_loss" in row:
                            f.write(f"{row['tokens'] / 1e6} {row['eval_loss']}\n")
                series.append(f"'{data}' using 1:2 with linespoints {style} ps 0.8 lw 1.5 title '{label}'")
            if series:
                panels.append(f"set title '{rule}'\nplot " + ", ".join(series))
        script = "\n".join([
            "set terminal pngcairo size 1600,450", f"set output '{chart}'",
            f"set multiplot layout 1,{len(panels)} title '{algorithm}, 4 replicas on Brown; replica 3 turns bad after "
            "step 100 (loss of the global parameters, validation)'",
            "set termoption noenhanced", "set grid", "set key top right font ',8'", "set xlabel 'tokens (millions)'",
            "set ylabel 'validation loss (nats/token)'", "set yrange [6.2:8.6]", *panels, "unset multiplot"])
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
            print(f"\nchart: {chart}")
        except FileNotFoundError:
            print("\n(no chart: gnuplot is not installed; apt-get install gnuplot-nox)")


if __name__ == "__main__":
    main()
