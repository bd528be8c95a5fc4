#!/usr/bin/env python3
"""bench/scaling_study_report.py on made-up sweep tables whose verdicts are known.

    tests/scripts/scaling_report_test.py LOCO_BINARY

Three sizes; data parallel, DiLoCo M = 1, 2, 4; 3 seeds per cell with a seed-to-seed sd of 0.01. DiLoCo
M = 1 beats data parallel by 0.05 at every size (claim 1 held), the penalty of M = 4 falls from 10% to
1% (claim 2 held), the best eta is 0.4 at every size (claim 3 held). Then the same tables with M = 1
0.005 above data parallel: within noise, so claim 1 is not resolvable; the noise is pooled per size, so a
margin that one size's spread hides is resolved at a quieter size. A diagnostics sweep's settings, seeds
pooled, are set against the data parallel cell of their size; a confirmation sweep's settings (8 seeds)
against data parallel of their size with the groups' own spread, and claims (1) and (2) on them.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LOCO = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "loco")
SIZES = [("s", 50_000), ("m", 200_000), ("l", 800_000)]
SEED_OFFSETS = [-0.01, 0.0, 0.01]  # sample sd 0.01


def dp_loss(n):
    return 20 * n ** -0.1


def write_study(directory, m1_margin, spread=None, sizes=SIZES):
    """summary.jsonl, summary.csv, cells.jsonl and cells.csv as loco sweep writes them; spread: size -> a
    factor on the seed offsets (sd 0.01 times it)."""
    runs, cells = [], []
    for size, n in sizes:
        groups = [("dp", 1, dp_loss(n))]
        for m, penalty in ((1, None), (2, None), (4, None)):
            if m == 1:
                loss = dp_loss(n) + m1_margin
            else:
                share = {"s": 0.10, "m": 0.05, "l": 0.01}[size] * (m / 4)
                loss = dp_loss(n) * (1 + share)
            groups.append(("diloco", m, loss))
        for alg, m, best in groups:
            cell = f"{alg}_size-{size}" + (f"_replicas-{m}" if alg != "dp" else "")
            grid = []
            etas = [0.2, 0.4, 0.8] if alg != "dp" else [None]
            for eta in etas:
                axes = {"size": size, "optim.lr": "0.004"}
                if eta is not None:
                    axes["diloco.outer_lr"] = str(eta)
                    axes["dist.replicas"] = str(m)
                loss = best + (0 if eta in (None, 0.4) else 0.3)
                name = cell + (f"_outer_lr-{eta}" if eta is not None else "")
                grid.append(dict(name=name, cell=cell, loss=loss, params=n * 3, non_embedding_params=n,
                                 replicas=m, algorithm="none" if alg == "dp" else alg, lr=0.004,
                                 outer_lr=eta, tokens=n, axes=axes))
            best_run = min(grid, key=lambda r: r["loss"])
            runs += grid
            repeats = []
            scale = (spread or {}).get(size, 1)
            for seed, offset in zip((1, 2), SEED_OFFSETS[::2]):
                repeat = dict(best_run, name=f"{best_run['name']}_seed-{seed}", loss=best_run["loss"] + offset * scale,
                              repeat_of=best_run["name"], axes=dict(best_run["axes"], **{"train.seed": str(seed)}))
                repeats.append(repeat)
            runs += repeats
            losses = [best_run["loss"]] + [r["loss"] for r in repeats]
            mean = sum(losses) / 3
            sd = (sum((x - mean) ** 2 for x in losses) / 2) ** 0.5
            cells.append(dict(best_run, loss=mean, best_run=best_run["name"], seeds=3, loss_best_run=best_run["loss"],
                              loss_min=min(losses), loss_max=max(losses), loss_sd=sd))
    columns = ["name", "loss", "params", "non_embedding_params", "replicas", "algorithm", "lr", "outer_lr", "tokens"]
    for stem, rows in (("summary", runs), ("cells", cells)):
        with open(os.path.join(directory, stem + ".jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        with open(os.path.join(directory, stem + ".csv"), "w") as f:
            f.write(",".join(columns) + "\n")
            for r in rows:
                f.write(",".join("" if r.get(c) is None else str(r[c]) for c in columns) + "\n")


def report(directory, *extra):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "scaling_study_report.py"), directory,
                             "--loco", LOCO, "--charts", directory, *extra], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(result.stderr + result.stdout)
    return result.stdout


class ScalingReport(unittest.TestCase):
    def test_known_verdicts(self):
        with tempfile.TemporaryDirectory() as d:
            write_study(d, m1_margin=-0.05)
            out = report(d)
            self.assertIn("pooled over the cells of each size (nats/token): s 0.0100, m 0.0100, l 0.0100", out)
            self.assertIn("(1) DiLoCo M=1 at or below data parallel at every N: **held**", out)
            self.assertIn("(2) The penalty of M > 1 shrinks as N grows: **held**", out)
            self.assertIn("(3) The best η does not drift with N: **held**", out)
            self.assertIn("M=4: +10.00% at s → +1.00% at l", out)
            # The fitted eta*(N) is flat: every size's best is 0.4.
            self.assertRegex(out, r"\| outer_lr \| DiLoCo, all M \| 0\.4 \| -?0\.000 \| -?0\.000 \|")
            for chart in ("scaling-loss.png", "scaling-eta.png"):
                self.assertGreater(os.path.getsize(os.path.join(d, chart)), 10_000, chart)

    def test_one_model_size_leaves_the_claims_across_sizes_unresolved(self):
        with tempfile.TemporaryDirectory() as d:
            write_study(d, m1_margin=-0.1, sizes=SIZES[1:2])
            out = report(d)
            self.assertIn("(1) DiLoCo M=1 at or below data parallel at every N: **held**", out)
            self.assertIn("(2), (3): not resolvable — they compare model sizes, and these runs have one (m)", out)
            self.assertNotIn("(3) The best η does not drift with N", out)

    def test_a_margin_within_noise_is_not_resolvable(self):
        with tempfile.TemporaryDirectory() as d:
            write_study(d, m1_margin=0.005)
            out = report(d)
            self.assertIn("(1) DiLoCo M=1 at or below data parallel at every N: **not resolvable**", out)
            write_study(d, m1_margin=0.1)
            self.assertIn("(1) DiLoCo M=1 at or below data parallel at every N: **not held**", report(d))

    def test_diagnostics_are_set_against_data_parallel_of_the_same_size(self):
        with tempfile.TemporaryDirectory() as d:
            write_study(d, m1_margin=-0.05)
            diagnostics = os.path.join(d, "diagnostics")
            os.mkdir(diagnostics)
            n = SIZES[1][1]
            rows = [dict(name=f"{setting}_seed-{seed}", loss=dp_loss(n) + shift + offset, non_embedding_params=n)
                    for setting, shift in (("low", -0.1), ("same", 0.002)) for seed, offset in enumerate(SEED_OFFSETS)]
            with open(os.path.join(diagnostics, "summary.jsonl"), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            out = report(d, "--diagnostics", diagnostics)
            self.assertRegex(out, rf"\| low \| 3 \| {dp_loss(n) - 0.1:.4f} ± 0\.0100 \| {dp_loss(n):.4f} \(m\) \| "
                                  r"-[0-9.]+ ± [0-9.]+ \| below \|")
            self.assertRegex(out, r"\| same \| 3 \| .* \| within noise \|")

    def test_the_noise_is_pooled_per_size(self):
        with tempfile.TemporaryDirectory() as d:
            write_study(d, m1_margin=0.03, spread={"s": 10})  # s: sd 0.1 hides 0.03; m and l: sd 0.01 do not
            out = report(d)
            self.assertIn("(nats/token): s 0.1000, m 0.0100, l 0.0100", out)
            self.assertRegex(out, r"s: \+0\.0300 ± [0-9.]+ \(not resolvable\); m: \+0\.0300 ± [0-9.]+ \(not held\)")

    def test_confirmation_sets_each_setting_against_data_parallel_of_its_size(self):
        with tempfile.TemporaryDirectory() as d:
            write_study(d, m1_margin=-0.05)
            confirmation = os.path.join(d, "confirmation")
            os.mkdir(confirmation)
            offsets = [0.02 * (k - 3.5) / 2.45 for k in range(8)]  # sample sd 0.02
            rows = []
            for size, n in (SIZES[0], SIZES[2]):
                settings = [("dp_size-" + size, "none", 1, 0.0), (f"diloco_size-{size}-m1", "diloco", 1, -0.05),
                            (f"diloco_size-{size}-m4", "diloco", 4, dp_loss(n) * (0.01 if size == "s" else 0.05))]
                for name, alg, m, shift in settings:
                    rows += [dict(name=f"{name.split('_')[0]}_seed-{10 + k}_{name.split('_', 1)[1]}",
                                  loss=dp_loss(n) + shift + o, non_embedding_params=n, replicas=m, algorithm=alg)
                             for k, o in enumerate(offsets)]
            with open(os.path.join(confirmation, "summary.jsonl"), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            out = report(d, "--confirmation", confirmation)
            self.assertRegex(out, rf"\| diloco_size-s-m1 \| 50,000 \| 1 \| 8 \| {dp_loss(50_000) - 0.05:.4f} ± 0\.0200 \| "
                                  rf"{dp_loss(50_000):.4f} ± 0\.0200 \| -[0-9.]+ ± [0-9.]+ \| below \|")
            self.assertIn("(1) on `diloco`: DiLoCo M=1 at or below data parallel at every N: **held**", out)
            self.assertIn("(2) on `diloco`, M=4: the penalty shrinks as N grows: **not held** — +1.00%", out)
            self.assertGreater(os.path.getsize(os.path.join(d, "scaling-confirmation.png")), 10_000)


if __name__ == "__main__":
    unittest.main()
