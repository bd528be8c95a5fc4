#!/usr/bin/env python3
"""bench/fidelity_report.py on made-up sweep runs whose gaps are computed by hand.

    tests/scripts/fidelity_report_test.py

One batch (8 sequences of 128 tokens). The map (seed 0): data parallel at lr 0.004 (5.30) and 0.008 (5.20,
the best); DiLoCo at data parallel's best lr, mu = 0.9 at eta 0.3 (5.50) and 0.5 (5.40, the best, at the
edge of its grid), mu = 0.5 at eta 0.5 (5.25), 0.7 (5.22, the best) and 1.0 (5.30). Seeds 1 and 2 of each
best: data parallel 5.10 and 5.30; mu = 0.9 5.31 and 5.51; mu = 0.5 5.08 and 5.35. The paired gaps
(DiLoCo - data parallel) / data parallel of seeds 0, 1, 2 are then, for mu = 0.9, 200/520, 21/510 and
21/530 (in %: 3.846, 4.118, 3.962), and for mu = 0.5, 2/520, -2/510, 5/530 (0.385, -0.392, 0.943).
"""
import math
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
REPORT = os.path.join(ROOT, "bench", "fidelity_report.py")


def write_run(sweep_dir, name, loss, algorithm, seed, lr, mu=None, eta=None):
    run = os.path.join(sweep_dir, name)
    os.makedirs(run)
    text = (f'[data]\nseq_len = 128\n[optim]\nlr = {lr}\nwarmup_steps = 65\nweight_decay = "0.1"\n'
            f'[train]\nbatch_size = 8\nseed = {seed}\nsteps = 1309\n'
            f'[dist]\nalgorithm = "{algorithm}"\nreplicas = 1\n')
    if algorithm == "diloco":
        text += f"[diloco]\nouter_momentum = {mu}\nouter_lr = {eta}\nsync_every = 119\n"
    with open(os.path.join(run, "config.toml"), "w") as f:
        f.write(text)
    return f"{name},{loss}\n"


def write_sweeps(root):
    batch = os.path.join(root, "fidelity-batch")
    seeds = os.path.join(root, "fidelity-seeds")
    rows = [write_run(batch, "dp_lr-0.004", 5.30, "none", 0, 0.004),
            write_run(batch, "dp_lr-0.008", 5.20, "none", 0, 0.008),
            write_run(batch, "mu0.9_eta-0.3", 5.50, "diloco", 0, 0.008, 0.9, 0.3),
            write_run(batch, "mu0.9_eta-0.5", 5.40, "diloco", 0, 0.008, 0.9, 0.5),
            write_run(batch, "mu0.5_eta-0.5", 5.25, "diloco", 0, 0.008, 0.5, 0.5),
            write_run(batch, "mu0.5_eta-0.7", 5.22, "diloco", 0, 0.008, 0.5, 0.7),
            write_run(batch, "mu0.5_eta-1", 5.30, "diloco", 0, 0.008, 0.5, 1.0)]
    with open(os.path.join(batch, "summary.csv"), "w") as f:
        f.write("name,loss\n" + "".join(rows))
    rows = [write_run(seeds, "dp_seed-1", 5.10, "none", 1, 0.008),
            write_run(seeds, "dp_seed-2", 5.30, "none", 2, 0.008),
            write_run(seeds, "mu0.9_seed-1", 5.31, "diloco", 1, 0.008, 0.9, 0.5),
            write_run(seeds, "mu0.9_seed-2", 5.51, "diloco", 2, 0.008, 0.9, 0.5),
            write_run(seeds, "mu0.5_seed-1", 5.08, "diloco", 1, 0.008, 0.5, 0.7),
            write_run(seeds, "mu0.5_seed-2", 5.35, "diloco", 2, 0.008, 0.5, 0.7)]
    with open(os.path.join(seeds, "summary.csv"), "w") as f:
        f.write("name,loss\n" + "".join(rows))


def mean_and_two_se(gaps):
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1))
    return mean, 2 * sd / math.sqrt(len(gaps))


class FidelityReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        write_sweeps(cls.tmp.name)
        result = subprocess.run([sys.executable, REPORT, "--runs", cls.tmp.name], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        cls.out = result.stdout

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def line(self, *words):
        lines = [l for l in self.out.splitlines() if all(w in l for w in words)]
        self.assertEqual(len(lines), 1, f"{words}: {lines}\n{self.out}")
        return lines[0]

    def test_the_map_names_each_best_and_marks_an_edge(self):
        row = self.line("| 8 (1,024) | 1309 |")
        self.assertIn("0.008*, 5.2000", row)  # data parallel's best lr is the top of its grid
        self.assertIn("0.5* of {0.3, 0.5}, 5.4000, +3.85%", row)
        self.assertIn("0.7 of {0.5, 0.7, 1.0}, 5.2200, +0.38%", row)

    def test_paired_gaps_over_seeds_and_their_verdicts(self):
        gap, two_se = mean_and_two_se([100 * 0.2 / 5.2, 100 * 0.21 / 5.1, 100 * 0.21 / 5.3])
        row = self.line("μ 0.9, η 0.5")
        self.assertIn(f"| {gap:+.2f} ± {two_se:.2f} | above |", row)
        self.assertIn("5.4067 ± 0.1002 | 5.2000 ± 0.1000", row)
        gap, two_se = mean_and_two_se([100 * 0.02 / 5.2, 100 * -0.02 / 5.1, 100 * 0.05 / 5.3])
        row = self.line("μ 0.5, η 0.7")
        self.assertIn(f"| {gap:+.2f} ± {two_se:.2f} | within noise |", row)


if __name__ == "__main__":
    unittest.main()
