#!/usr/bin/env python3
"""Issue 36's fidelity study: where DiLoCo with one replica loses to data parallel, and what decides it.

Reads the runs of bench/sweeps/fidelity-batch.toml (the batch map, seed 0), fidelity-seeds.toml (every best
cell again with seeds 1 and 2), fidelity-outer-steps.toml (more outer steps at one batch) and
fidelity-factors.toml (weight decay 1/T, warm-up, DiLoCo's own inner lr, M = 2), and prints markdown tables:

  python3 bench/fidelity_report.py [--runs runs] [--chart docs/fidelity-gap-batch.png] [--gpu]

With --gpu the map is bench/sweeps/fidelity-gpu.toml's (the larger size on one GPU, DiLoCo's inner lr tuned).

Every setting is read from the run's own config.toml, the loss from the sweep's summary.csv (validation loss
of the final parameters over the whole validation split). A gap is (DiLoCo - data parallel) / data parallel
in percent; with seeds it is the mean of the per-seed gaps (data parallel of the same seed: same initial
model, same data order) and ± two standard errors of that mean. "within noise" means the interval holds 0.
The chart (gnuplot) is the gap against the batch, one line per outer momentum.
"""

import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import chart_style  # noqa: E402

MOMENTA = (0.9, 0.7, 0.5, 0.0)
SWEEPS = ("fidelity-batch", "fidelity-seeds", "fidelity-outer-steps", "fidelity-factors", "fidelity-gpu")


class Run:
    def __init__(self, sweep, name, loss, config):
        self.sweep, self.name, self.loss = sweep, name, loss
        optim, train, dist = (config.get(k, {}) for k in ("optim", "train", "dist"))
        self.algorithm = dist.get("algorithm", "none")
        self.replicas = dist.get("replicas", 1)
        self.batch = train["batch_size"]
        self.seq_len = config.get("data", {}).get("seq_len", 128)
        self.seed = train.get("seed", 0)
        self.lr = optim["lr"]
        self.warmup = optim.get("warmup_steps")
        self.weight_decay = str(optim.get("weight_decay", "0.1"))
        self.steps = train.get("steps")
        self.dl = self.algorithm in ("diloco", "streaming")  # the outer Nesterov step, in their own sections
        outer = config.get(self.algorithm, {}) if self.dl else {}
        self.mu = outer.get("outer_momentum") if self.dl else None
        self.eta = outer.get("outer_lr") if self.dl else None
        self.h = outer.get("sync_every") if self.dl else None

    def setting(self):
        """Everything but the seed."""
        return (self.algorithm, self.replicas, self.batch, self.lr, self.warmup, self.weight_decay, self.mu,
                self.eta, self.h)

    def outer_steps(self):
        return math.ceil(self.steps / self.h) if self.dl and self.steps else None


def load(runs_dir):
    runs = []
    for sweep in SWEEPS:
        summary = os.path.join(runs_dir, sweep, "summary.csv")
        if not os.path.exists(summary):
            continue
        with open(summary) as f:
            for row in csv.DictReader(f):
                try:
                    loss = float(row["loss"])
                except (KeyError, ValueError):
                    continue
                config_path = os.path.join(runs_dir, sweep, row["name"], "config.toml")
                if not math.isfinite(loss) or not os.path.exists(config_path):
                    continue
                with open(config_path, "rb") as c:
                    runs.append(Run(sweep, row["name"], loss, tomllib.load(c)))
    return runs


def mean_sd(values):
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else float("nan")
    return m, sd


def gap(a, b):
    return 100.0 * (a - b) / b


def print_table(title, columns, rows):
    """A markdown table under its heading; nothing when there are no rows."""
    if not rows:
        return
    print(f"### {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    print("\n".join(rows) + "\n")


def verdict(g, two_se):
    if not math.isfinite(two_se):
        return "one seed"
    if g - two_se > 0:
        return "above"
    if g + two_se < 0:
        return "below"
    return "within noise"


class Report:
    def __init__(self, runs, map_sweep):
        self.runs = [r for r in runs if (r.sweep == "fidelity-gpu") == (map_sweep == "fidelity-gpu")]
        self.map_sweep = map_sweep
        self.batches = sorted({r.batch for r in self.runs if r.sweep == map_sweep})

    def select(self, **want):
        def ok(r):
            return all(getattr(r, k) == v for k, v in want.items())
        return [r for r in self.runs if ok(r)]

    def baseline(self, batch):
        """Data parallel's best run at this batch among the seed-0 runs of the map."""
        pool = [r for r in self.select(algorithm="none", batch=batch, seed=0, replicas=1) if r.sweep == self.map_sweep]
        return min(pool, key=lambda r: r.loss) if pool else None

    def variant(self, template, weight_decay, warmup_changed):
        """The run of fidelity-factors.toml that is `template` with one factor changed: weight decay
        `weight_decay`, and the warm-up changed or kept."""
        for r in self.runs:
            if (r.sweep == "fidelity-factors" and r.seed == 0 and r.weight_decay == weight_decay
                    and (r.algorithm, r.replicas, r.batch, r.lr, r.mu, r.eta, r.h) ==
                    (template.algorithm, 1, template.batch, template.lr, template.mu, template.eta, template.h)
                    and (r.warmup != template.warmup) == warmup_changed):
                return r
        return None

    def best_dl(self, batch, mu):
        """DiLoCo M = 1's best seed-0 run of the map at this batch and mu (every inner lr the map tried), with
        the eta tried."""
        pool = [r for r in self.select(algorithm="diloco", batch=batch, seed=0, replicas=1, mu=mu)
                if (r.sweep in (self.map_sweep, "fidelity-seeds") or r.name.startswith("dl_mu"))
                and r.weight_decay == "0.1"]
        base = self.baseline(batch)
        if base:
            pool = [r for r in pool if r.warmup == base.warmup]
            if self.map_sweep == "fidelity-batch":  # the CPU map runs DiLoCo at data parallel's best lr
                pool = [r for r in pool if r.lr == base.lr]
        return (min(pool, key=lambda r: r.loss), sorted({r.eta for r in pool})) if pool else (None, [])

    def best_seeded(self, batch, mu):
        """Of the map's seed-0 runs at this batch and mu, the best one that was also run with other seeds (the
        seeds were run at the best of the first grid; an edge run added later may have beaten it on seed 0)."""
        best, _ = self.best_dl(batch, mu)
        if not best:
            return None
        pool = [r for r in self.select(algorithm="diloco", batch=batch, seed=0, replicas=1, mu=mu, lr=best.lr,
                                       warmup=best.warmup, weight_decay="0.1")
                if r.sweep == self.map_sweep and len(self.seeds_of(r)) > 1]
        return min(pool, key=lambda r: r.loss) if pool else None

    def seeds_of(self, run):
        by_seed = {}
        for r in self.runs:
            if r.setting() == run.setting() and r.seed not in by_seed:
                by_seed[r.seed] = r
        return by_seed

    def paired_gap(self, dl_run, dp_run):
        """Mean gap over the seeds both settings ran, ± two standard errors; and both losses' mean ± sd."""
        a, b = self.seeds_of(dl_run), self.seeds_of(dp_run)
        seeds = sorted(set(a) & set(b))
        gaps = [gap(a[s].loss, b[s].loss) for s in seeds]
        g, sd = mean_sd(gaps)
        two_se = 2 * sd / math.sqrt(len(gaps)) if len(gaps) > 1 else float("nan")
        return g, two_se, seeds, mean_sd([a[s].loss for s in seeds]), mean_sd([b[s].loss for s in seeds])

    def tokens(self, batch):
        return batch * self.runs[0].seq_len

    # ---- tables ----
    def map_table(self):
        print("### The map (seed 0): best outer lr per batch and outer momentum, gap to data parallel\n")
        print("| batch (tokens/step) | steps | data parallel: best lr, loss | " +
              " | ".join(f"μ = {mu}: best η of the grid, loss, gap" for mu in MOMENTA) + " |")
        print("|---|---|---|" + "---|" * len(MOMENTA))
        for b in self.batches:
            dp = self.baseline(b)
            if not dp:
                continue
            dp_lrs = sorted({r.lr for r in self.select(algorithm="none", batch=b, seed=0) if r.sweep == self.map_sweep})
            cells = []
            for mu in MOMENTA:
                best, etas = self.best_dl(b, mu)
                if not best:
                    cells.append("—")
                    continue
                grid = list(etas) + ([1.0] if mu == 0.0 else [])  # mu = 0, eta = 1 is data parallel itself
                edge = "*" if best.eta in (min(grid), max(grid)) else ""
                lr = f" (lr {best.lr})" if best.lr != dp.lr else ""
                cells.append(f"{best.eta}{edge} of {{{', '.join(str(e) for e in grid)}}}{lr}, {best.loss:.4f}, "
                             f"{gap(best.loss, dp.loss):+.2f}%")
            lr_edge = "*" if dp.lr in (dp_lrs[0], dp_lrs[-1]) else ""
            print(f"| {b} ({self.tokens(b):,}) | {dp.steps} | {dp.lr}{lr_edge}, {dp.loss:.4f} | " + " | ".join(cells) + " |")
        print("\n(* the best value lies at the edge of its grid; for μ = 0 the grid's η = 1 is data parallel.)\n")

    def seeded_cells(self):
        """(batch, mu, DiLoCo's best seeded run, data parallel's best run, paired_gap) for every cell of the map
        that was run with more than one seed."""
        for b in self.batches:
            dp = self.baseline(b)
            if not dp:
                continue
            for mu in MOMENTA:
                best = self.best_seeded(b, mu)
                if best:
                    paired = self.paired_gap(best, dp)
                    if len(paired[2]) > 1:
                        yield b, mu, best, dp, paired

    def seeds_table(self):
        rows = []
        for b, mu, best, dp, (g, two_se, seeds, (dlm, dls), (dpm, dps)) in self.seeded_cells():
            rows.append(f"| {b} ({self.tokens(b):,}) | μ {mu}, η {best.eta}, H {best.h} ({best.outer_steps()} outer "
                        f"steps) | {len(seeds)} | {dlm:.4f} ± {dls:.4f} | {dpm:.4f} ± {dps:.4f} | {g:+.2f} ± "
                        f"{two_se:.2f} | {verdict(g, two_se)} |")
        print_table("Each best cell with 3 seeds: gap to data parallel of the same seeds",
                    ["batch (tokens/step)", "setting", "seeds", "DiLoCo loss, mean ± sd", "data parallel, mean ± sd",
                     "gap (%, ± 2 SE)", "against data parallel"], rows)

    def outer_steps_table(self):
        runs = [r for r in self.runs if r.sweep == "fidelity-outer-steps"]
        if not runs:
            return
        b = runs[0].batch
        dp = self.baseline(b)
        same = [r for r in self.select(algorithm="diloco", batch=b, seed=0, replicas=1, lr=runs[0].lr)
                if r.sweep in ("fidelity-batch", "fidelity-outer-steps") and r.weight_decay == "0.1"]
        rows = []
        for mu in (0.9, 0.5, 0.0):
            for eta in sorted({r.eta for r in same if r.mu == mu}):
                cells = []
                for h in (30, 10, 4):
                    hit = [r for r in same if r.mu == mu and r.eta == eta and r.h == h]
                    cells.append(f"{hit[0].loss:.4f} ({gap(hit[0].loss, dp.loss):+.2f}%)" if hit else "—")
                if any(c != "—" for c in cells[1:]):
                    rows.append(f"| {mu} | {eta} | " + " | ".join(cells) + " |")
        print_table(f"More outer steps at one batch ({b} sequences, {self.tokens(b):,} tokens per step, seed 0; "
                    f"data parallel {dp.loss:.4f})", ["μ", "η", "H = 30 (11 outer steps)", "H = 10 (33)", "H = 4 (82)"],
                    rows)

    def factors_table(self):
        runs = [r for r in self.runs if r.sweep == "fidelity-factors"]
        rows = []
        for b in self.batches:
            dp0 = self.baseline(b)
            if not dp0:
                continue
            base = {mu: self.best_dl(b, mu)[0] for mu in (0.9, 0.5)}
            base_gaps = ", ".join(f"{gap(base[mu].loss, dp0.loss):+.2f}%" if base[mu] else "—" for mu in (0.9, 0.5))
            for factor, weight_decay, warmup_changed in (("weight decay 1/T", "1/T", False),
                                                         ("warm-up 25%", "0.1", True)):
                dp = self.variant(dp0, weight_decay, warmup_changed)
                if not dp:
                    continue
                cells = []
                for mu in (0.9, 0.5):
                    r = self.variant(base[mu], weight_decay, warmup_changed) if base[mu] else None
                    cells.append(f"{r.loss:.4f} ({gap(r.loss, dp.loss):+.2f}%)" if r else "—")
                rows.append(f"| {b} | {factor} | {dp.loss:.4f} ({gap(dp.loss, dp0.loss):+.2f}% vs 0.1 / 5%) | "
                            + " | ".join(cells) + f" | {base_gaps} |")
        print_table("One factor at a time (seed 0): loss, and the gap to data parallel under the same factor",
                    ["batch", "factor", "data parallel", "DiLoCo μ 0.9 (gap)", "DiLoCo μ 0.5 (gap)",
                     "baseline gaps μ 0.9, μ 0.5"], rows)
        rows = []
        for b in self.batches:
            dp0 = self.baseline(b)
            for mu in (0.9, 0.5):
                best = self.best_dl(b, mu)[0]
                if not best or not dp0:
                    continue
                cells = []
                for lr in (best.lr / 2, best.lr, best.lr * 2, best.lr * 4):
                    hit = [r for r in self.select(algorithm="diloco", batch=b, seed=0, replicas=1, mu=mu, eta=best.eta,
                                                  h=best.h, warmup=best.warmup, weight_decay="0.1")
                           if math.isclose(r.lr, lr)]
                    cells.append(f"{hit[0].loss:.4f} ({gap(hit[0].loss, dp0.loss):+.2f}%)" if hit else "—")
                if cells[0] != "—" or cells[2] != "—" or cells[3] != "—":
                    rows.append(f"| {b} | {mu} | {best.eta} | " + " | ".join(cells) + " |")
        print_table("DiLoCo's own inner lr (seed 0, each batch's best η): loss, gap to data parallel's best",
                    ["batch", "μ", "η", "lr ½×", "lr as data parallel", "lr 2×", "lr 4×"], rows)
        rows = []
        for r in sorted((r for r in runs if r.replicas == 2 and r.algorithm == "diloco"),
                        key=lambda r: (r.batch, -r.mu, r.eta)):
            dp0 = self.baseline(r.batch)
            one = self.best_seeded(r.batch, r.mu)
            g, two_se, seeds, _, _ = self.paired_gap(r, dp0)
            g1, two_se1, seeds1, _, _ = self.paired_gap(one, dp0) if one else (0, 0, [], 0, 0)
            rows.append(f"| {r.batch} | {r.mu} | {r.eta} | {r.loss:.4f} ({gap(r.loss, dp0.loss):+.2f}%) | "
                        + (f"{g:+.2f} ± {two_se:.2f} ({verdict(g, two_se)})" if len(seeds) > 1 else "—") + " | "
                        + (f"{g1:+.2f} ± {two_se1:.2f}, η {one.eta}" if len(seeds1) > 1 else "—") + " |")
        print_table("M = 2 (the global batch split): gap to data parallel, against M = 1's best",
                    ["batch", "μ", "η", "seed 0: loss (gap)", "3 seeds: gap (%, ± 2 SE)", "M = 1, 3 seeds: gap, η"],
                    rows)

    def warmup_seeds_table(self):
        """Warm-up 25% with seeds: the paired gap of mu = 0.9 under it, against the map's 5%."""
        rows = []
        for b in self.batches:
            dp0 = self.baseline(b)
            best = self.best_seeded(b, 0.9)
            if not dp0 or not best:
                continue
            dp, dl = self.variant(dp0, "0.1", True), self.variant(best, "0.1", True)
            if not dp or not dl:
                continue
            g, two_se, seeds, (dlm, dls), (dpm, dps) = self.paired_gap(dl, dp)
            g0, two_se0, _, _, _ = self.paired_gap(best, dp0)
            if len(seeds) < 2:
                continue
            rows.append(f"| {b} ({self.tokens(b):,}) | {dp.warmup} of {dp.steps} | {len(seeds)} | {dpm:.4f} ± {dps:.4f} | "
                        f"{dlm:.4f} ± {dls:.4f} | {g:+.2f} ± {two_se:.2f} ({verdict(g, two_se)}) | {g0:+.2f} ± {two_se0:.2f} |")
        print_table("Warm-up 25% of the steps, 3 seeds: DiLoCo μ = 0.9 (best η) against data parallel, both warmed up "
                    "alike", ["batch (tokens/step)", "warm-up steps", "seeds", "data parallel", "DiLoCo μ 0.9",
                              "gap (%, ± 2 SE)", "gap with 5% warm-up"], rows)

    def streaming_table(self):
        rows = []
        for r in sorted((r for r in self.runs if r.algorithm == "streaming"), key=lambda r: (r.batch, -r.mu, r.eta)):
            dp0 = self.baseline(r.batch)
            rows.append(f"| {r.batch} | {r.replicas} | defaults (2, 1, fp4) | {r.mu} | {r.eta} | {r.loss:.4f} | "
                        f"{gap(r.loss, dp0.loss):+.2f}% |")
        print_table("Streaming DiLoCo (seed 0): the outer step's μ and η",
                    ["batch", "M", "fragments, τ, codec", "μ", "η", "loss", "gap to data parallel's best"], rows)

    def chart(self, png):
        points = {}
        for b, mu, _, _, (g, two_se, _, _, _) in self.seeded_cells():
            points.setdefault(mu, []).append((self.tokens(b), g, two_se))
        if not points:
            return
        with tempfile.TemporaryDirectory() as work:
            series = []
            for i, mu in enumerate(sorted(points, reverse=True)):
                path = os.path.join(work, f"gap{i}.dat")
                with open(path, "w") as f:
                    f.writelines(f"{t} {g} {e}\n" for t, g, e in sorted(points[mu]))
                series.append(f"{chart_style.quote(path)} using 1:2:3 with yerrorlines {chart_style.style(i + 1)} "
                              f"title {chart_style.quote(f'DiLoCo M=1, outer momentum {mu} (best eta)')}")
            script = "\n".join([
                f"set terminal pngcairo size 900,540", f"set output {chart_style.quote(png)}",
                "set termoption noenhanced", "set grid", "set key font ',9'", "set key top right",
                "set title 'Gap of tuned DiLoCo M=1 to tuned data parallel at 1.34M tokens (3 seeds, +-2 SE)'",
                "set logscale x 2", "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05",
                "set xlabel 'global batch (tokens per step)'", "set ylabel 'gap to data parallel (%)'",
                "set arrow from graph 0, first 0 to graph 1, first 0 nohead dt 2",
                "plot " + ", ".join(series)])
            try:
                subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
            except FileNotFoundError:
                print("(no chart: gnuplot is not installed; apt-get install gnuplot-nox)")
                return
            except subprocess.CalledProcessError as e:
                sys.exit(f"fidelity_report: gnuplot failed on {png}: {e.stderr}")
        print(f"Chart: {png}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs", help="the directory holding runs/fidelity-* (default: runs)")
    parser.add_argument("--chart", default=None, help="write the gap-against-batch chart to this PNG")
    parser.add_argument("--gpu", action="store_true", help="the map of bench/sweeps/fidelity-gpu.toml instead")
    args = parser.parse_args()
    runs = load(args.runs)
    map_sweep = "fidelity-gpu" if args.gpu else "fidelity-batch"
    if not any(r.sweep == map_sweep for r in runs):
        sys.exit(f"fidelity_report: no finished run of bench/sweeps/{map_sweep}.toml in {args.runs}/{map_sweep}; "
                 f"run `loco sweep bench/sweeps/{map_sweep}.toml` first")
    report = Report(runs, map_sweep)
    report.map_table()
    report.seeds_table()
    report.outer_steps_table()
    report.factors_table()
    report.warmup_seeds_table()
    report.streaming_table()
    if args.chart:
        report.chart(args.chart)


if __name__ == "__main__":
    main()
