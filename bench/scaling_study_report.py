#!/usr/bin/env python3
"""Report of the scaling-law study (docs/scaling-study.md): tables, fitted laws, the paper's claims, charts.

    bench/scaling_study_report.py STUDY_DIR [CLAIMS_DIR] [--diagnostics DIR] [--confirmation DIR]
                                  [--loco build/loco] [--charts DIR]

STUDY_DIR is loco sweep's output of bench/sweeps/scaling-study.toml (summary.jsonl, cells.jsonl, cells.csv,
summary.csv), CLAIMS_DIR that of bench/sweeps/scaling-claims.toml. Prints markdown: the best loss of each
(N, M) as the mean over its seeds, its gap to data parallel, the tuned learning rates, the laws that
`loco fit` fits to the tables (L(N, M) from cells.csv, eta*(N, M) and lr*(N, M) from summary.csv) with
their leave-one-out errors, and a verdict on each claim of docs/algorithm-reference.md §3 under the rule below; with
--diagnostics (bench/sweeps/scaling-diagnostics.toml's output), each of its settings (seeds pooled) against
the data parallel cell of the same model size; with --confirmation, the section described below. Draws
scaling-loss.png, scaling-eta.png, scaling-batch.png (and scaling-confirmation.png) into --charts
(gnuplot; scripts/chart_style.py).

The rule for a verdict: the seed-to-seed standard deviation sigma is pooled per model size over its cells
with more than one seed (a cell has only 3 seeds, and the spread differs between sizes: small models at
high learning rates vary far more from seed to seed); a difference between two cell means is resolved
when it exceeds twice its standard error, sqrt(sigma_a^2/n_a + sigma_b^2/n_b); otherwise it is "not
resolvable" at this noise. With --confirmation (bench/sweeps/scaling-seeds.toml's output: fixed settings,
8 seeds the tuning never saw), each setting is set against data parallel of its size with the two
groups' own standard deviations. Standard library only.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import chart_style  # noqa: E402

MODEL_AXES = ("size",)


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def algorithm(row):
    return "dp" if row["algorithm"] in ("none", "ddp") else row["algorithm"]


def group_label(alg, m):
    return "data parallel" if alg == "dp" else f"{alg} M={m}"


class Cell:
    """A cell of cells.jsonl: its best run's settings and the mean loss over its seeds."""

    def __init__(self, row, runs):
        self.row = row
        self.name = row["cell"]
        self.size = row["axes"].get("size", "")
        self.alg = algorithm(row)
        self.m = row["replicas"] if self.alg != "dp" else 1
        self.n = int(row["non_embedding_params"])
        self.n_total = int(row["params"])
        self.loss = row["loss"]
        self.seeds = row["seeds"]
        self.sd = row["loss_sd"]
        self.losses = [r["loss"] for r in runs if r["name"] == row["best_run"] or r.get("repeat_of") == row["best_run"]]
        self.grid = [r for r in runs if r["cell"] == self.name and "repeat_of" not in r]  # the tuning grid

    def tried(self, key):
        return sorted({float(r["axes"][key]) for r in self.grid if key in r["axes"]})

    def best(self, key):
        value = self.row["axes"].get(key)
        return float(value) if value is not None else None


def load(directory):
    runs = read_jsonl(os.path.join(directory, "summary.jsonl"))
    return [Cell(row, runs) for row in read_jsonl(os.path.join(directory, "cells.jsonl"))], runs


def pooled_sd(cells):
    """sqrt of the mean seed variance over cells with more than one seed, weighted by degrees of freedom."""
    num = den = 0.0
    for c in cells:
        if len(c.losses) > 1:
            mean = sum(c.losses) / len(c.losses)
            num += sum((x - mean) ** 2 for x in c.losses)
            den += len(c.losses) - 1
    return math.sqrt(num / den) if den else float("nan")


def verdict(diff, se, better_is_negative=True):
    """'held', 'not held' or 'not resolvable' for a claim that `diff` is negative (or positive)."""
    if math.isnan(se) or abs(diff) <= 2 * se:
        return "not resolvable"
    return "held" if (diff < 0) == better_is_negative else "not held"


def no_worse_than(diff, se, tolerance):
    """A claim that `diff` (this method's loss minus the reference's) is at most `tolerance`: held when
    the whole two-standard-error interval is below it, not held when the whole interval is above it."""
    if math.isnan(se):
        return "not resolvable"
    if diff + 2 * se <= tolerance:
        return "held"
    return "not held" if diff - 2 * se > tolerance else "not resolvable"


SIDE = {"held": "below", "not held": "above", "not resolvable": "within noise"}
GRID_TITLES = {"diloco": "DiLoCo mu=0.9 tuned", "mu05": "DiLoCo mu=0.5 eta=0.5"}  # bench/sweeps/scaling-seeds.toml


def mean_sd(values):
    """The mean and the sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1)) if len(values) > 1 else 0.0


def settings(directory):
    """The finished runs of a sweep grouped by setting: each name with its seed taken out."""
    groups = {}
    for r in read_jsonl(os.path.join(directory, "summary.jsonl")):
        if r["loss"] is not None:
            name = re.sub(r"_+", "_", re.sub(r"(^|_)seed-\d+(?=_|$)", "", r["name"])).strip("_")
            groups.setdefault(name, []).append(r)
    return groups


def fmt_loss(c):
    return f"{c.loss:.4f} ± {c.sd:.4f} ({c.seeds})" if c else "—"


def run_fit(loco, table, extra=()):
    result = subprocess.run([loco, "fit", table, "--count", "non-embedding", "--json", *extra],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return {"error": (result.stderr or result.stdout).strip()}
    return json.loads(result.stdout)


def peak_mb(run_dir):
    """The most bytes replica 0 sent in one logged interval (the run's last interval left out: every
    strategy syncs everything at its last step), and all it sent, in MB."""
    rows = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    sent = [r.get("bytes_sent", 0) for r in rows]
    steps = [r["step"] for r in rows]
    increments = [(b - a, s - t) for a, b, t, s in zip([0] + sent, sent, [0] + steps, steps)][:-1]
    per_step = max((d / max(1, k) for d, k in increments), default=0)
    return per_step * 10 / 1e6, (sent[-1] if sent else 0) / 1e6


class Report:
    def __init__(self, args):
        self.args = args
        self.cells, self.runs = load(args.study)
        self.claims, self.claim_runs = load(args.claims) if args.claims else ([], [])
        everything = self.cells + self.claims
        self.sigmas = {size: pooled_sd([c for c in everything if c.size == size]) for size in {c.size for c in everything}}
        self.sizes = sorted({(c.n, c.size, c.n_total) for c in self.cells})
        self.lines = []

    def say(self, text=""):
        self.lines.append(text)

    def cell(self, size, alg, m=1, cells=None):
        for c in cells if cells is not None else self.cells:
            if c.size == size and c.alg == alg and (alg == "dp" or c.m == m):
                return c
        return None

    def sigma(self, size):
        """The seed-to-seed standard deviation pooled over the cells of one model size."""
        return self.sigmas.get(size, float("nan"))

    def se(self, *cells):
        """The standard error of a sum or difference of cell means."""
        return math.sqrt(sum(self.sigma(c.size) ** 2 / len(c.losses) for c in cells))

    def gap(self, c, base):
        """(gap in %, twice its standard error in %) of cell c against cell base."""
        return 100 * (c.loss / base.loss - 1), 200 * self.se(c, base) / base.loss

    # --- tables --------------------------------------------------------------------------------------
    def tables(self):
        groups = [("dp", 1)] + [("diloco", m) for m in (1, 2, 4)]
        self.say("Seed-to-seed standard deviation sigma, pooled over the cells of each size (nats/token): "
                 + ", ".join(f"{size} {self.sigma(size):.4f}" for _, size, _ in self.sizes) + ".\n")
        self.say("Best loss per (N, M): mean ± sd over seeds (runs), validation loss of the final parameters")
        self.say("| size | N non-embedding | N total | tokens | " + " | ".join(group_label(a, m) for a, m in groups) + " |")
        self.say("|---" * (4 + len(groups)) + "|")
        for n, size, total in self.sizes:
            dp = self.cell(size, "dp")
            tokens = dp.row["tokens"] if dp else ""
            cells = [self.cell(size, a, m) for a, m in groups]
            self.say(f"| {size} | {n:,} | {total:,} | {tokens:,} | " + " | ".join(fmt_loss(c) for c in cells) + " |")
        self.say("\nGap to data parallel (%, ± two standard errors)")
        self.say("| size | " + " | ".join(f"DiLoCo M={m}" for m in (1, 2, 4)) + " |")
        self.say("|---" * 4 + "|")
        for n, size, _ in self.sizes:
            dp = self.cell(size, "dp")
            row = []
            for m in (1, 2, 4):
                c = self.cell(size, "diloco", m)
                row.append("—" if not (c and dp) else "{:+.2f} ± {:.2f}".format(*self.gap(c, dp)))
            self.say(f"| {size} | " + " | ".join(row) + " |")
        self.say("\nTuned learning rates per (N, M): the best run's inner lr and eta (grid tried in brackets; "
                 "an asterisk marks a value at the edge of its grid)")
        self.say("| size | " + " | ".join(group_label(a, m) for a, m in groups) + " |")
        self.say("|---" * (1 + len(groups)) + "|")
        for n, size, _ in self.sizes:
            row = []
            for a, m in groups:
                c = self.cell(size, a, m)
                if not c:
                    row.append("—")
                    continue
                parts = []
                for key, label in (("optim.lr", "lr"), ("diloco.outer_lr", "η")):
                    tried = c.tried(key)
                    if not tried:
                        continue
                    best = c.best(key)
                    edge = "*" if len(tried) > 1 and best in (tried[0], tried[-1]) else ""
                    parts.append(f"{label} {best:g}{edge} [{', '.join(f'{t:g}' for t in tried)}]")
                row.append("; ".join(parts))
            self.say(f"| {size} | " + " | ".join(row) + " |")

    # --- fits ----------------------------------------------------------------------------------------
    def fits(self):
        loco = self.args.loco
        self.say("\n## Fitted laws (`loco fit ... --count non-embedding`)\n")
        laws = run_fit(loco, os.path.join(self.args.study, "cells.csv"))
        if "error" in laws:
            self.say(f"loss laws: not fitted ({laws['error']})")
        else:
            self.say("Loss laws, fitted to each cell's mean over seeds (cells.csv):")
            self.say("| form | parameters | rms log residual | leave-one-out error at the largest N |")
            self.say("|---|---|---|---|")
            forms = [(f"L = A·N^α, {group_label(g['algorithm'], g['replicas'])}", g["fit"]) for g in laws["per_group"]]
            forms += [("L = A·N^α·M^β (DiLoCo)", laws["joint"]), ("L = A·N^(α+β·M) + C (DiLoCo)", laws["additive"])]
            for name, fit in forms:
                if "skipped" in fit:
                    self.say(f"| {name} | skipped: {fit['skipped']} | | |")
                    continue
                params = ", ".join(f"{k} = {v:.4g}" for k, v in fit["parameters"].items()
                                   if k in ("A", "alpha", "beta", "C"))
                holdout = fit["leave_one_out_largest_n"]
                loo = (f"{100 * holdout['mean_abs_relative_error']:.2f}%" if "mean_abs_relative_error" in holdout
                       else holdout.get("note", ""))
                self.say(f"| {name} | {params} | {fit['rms_log_residual']:.4f} | {loo} |")
        optima = run_fit(loco, os.path.join(self.args.study, "summary.csv"))
        self.hyper = []
        if "error" in optima:
            self.say(f"\noptimal hyperparameters: not fitted ({optima['error']})")
            return
        self.say("\nOptimal learning rates against N, from every run (summary.csv): y* = A·N^α per group, "
                 "y* = A·N^α·M^β across M")
        self.say("| quantity | group | A | α | β | optima (N: value) | leave-one-out error at the largest N |")
        self.say("|---|---|---|---|---|---|---|")
        for h in optima["optimal_hyperparameters"]:
            if "skipped" in h or h["quantity"] == "batch":
                continue
            self.hyper.append(h)
            group = "DiLoCo, all M" if h["replicas"] == "all" else group_label(h["algorithm"], h["replicas"])
            points = h.get("optima", [])
            shown = ", ".join(f"{p[0]:.3g}: {p[-1]:g}" for p in points)
            holdout = h.get("leave_one_out_largest_n", {})
            loo = (f"{100 * holdout['mean_abs_relative_error']:.1f}%" if "mean_abs_relative_error" in holdout
                   else holdout.get("note", ""))
            beta = f"{h['beta']:.3f}" if "beta" in h else ""
            self.say(f"| {h['quantity']} | {group} | {h['A']:.4g} | {h['alpha']:.3f} | {beta} | {shown} | {loo} |")

    # --- claims --------------------------------------------------------------------------------------
    def claims_section(self):
        self.say("\n## The claims\n")
        sizes = [size for _, size, _ in self.sizes]
        if not sizes:
            return
        # (1) DiLoCo M=1 <= data parallel at every N.
        results = []
        for size in sizes:
            c, dp = self.cell(size, "diloco", 1), self.cell(size, "dp")
            if c and dp:
                results.append((size, c.loss - dp.loss, self.se(c, dp), verdict(c.loss - dp.loss, self.se(c, dp))))
        overall = ("held" if results and all(v == "held" for *_, v in results)
                   else "not held" if any(v == "not held" for *_, v in results) else "not resolvable")
        self.say(f"(1) DiLoCo M=1 at or below data parallel at every N: **{overall}** — "
                 + "; ".join(f"{s}: {d:+.4f} ± {2 * u:.4f} ({v})" for s, d, u, v in results))
        if len(sizes) < 2:  # the sotu profile has one size
            self.say(f"\n(2), (3): not resolvable — they compare model sizes, and these runs have one ({sizes[0]})")
        else:
            self.claims_across_sizes(sizes)
        self.claims_4_to_6()

    def claims_across_sizes(self, sizes):
        """(2) from the smallest and the largest size, (3) from every size."""
        # (2) The penalty of M > 1 shrinks as N grows.
        small, large = sizes[0], sizes[-1]
        parts, verdicts = [], []
        for m in (2, 4):
            g = {}
            for size in (small, large):
                c, dp = self.cell(size, "diloco", m), self.cell(size, "dp")
                if c and dp:
                    g[size] = (c.loss / dp.loss - 1, self.se(c, dp) / dp.loss)
            if len(g) == 2:
                change = g[large][0] - g[small][0]
                se = math.hypot(g[large][1], g[small][1])
                verdicts.append(verdict(change, se))
                parts.append(f"M={m}: {100 * g[small][0]:+.2f}% at {small} → {100 * g[large][0]:+.2f}% at {large} "
                             f"(change {100 * change:+.2f} ± {200 * se:.2f} points, {verdicts[-1]})")
        overall = ("held" if verdicts and all(v == "held" for v in verdicts)
                   else "not held" if any(v == "not held" for v in verdicts) else "not resolvable")
        self.say(f"\n(2) The penalty of M > 1 shrinks as N grows: **{overall}** — " + "; ".join(parts))
        # (3) The best eta does not drift with N: per M, the etas within noise of each size's best.
        parts, common_all = [], True
        for m in (1, 2, 4):
            within, best = [], []
            for size in sizes:
                curve = self.eta_curve(size, m)
                if not curve:
                    continue
                tol = 2 * self.sigma(size) * math.sqrt(2)  # two single-seed runs
                low = min(curve.values())
                within.append({eta for eta, loss in curve.items() if loss - low <= tol})
                best.append(f"{size} {min(curve, key=curve.get):g}")
            if not within:
                continue
            common = set.intersection(*within)
            common_all &= bool(common)
            parts.append(f"M={m}: best η {', '.join(best)}; within noise of the best at every N: "
                         + (", ".join(f"{e:g}" for e in sorted(common)) or "none"))
        fitted = [h for h in self.hyper if h["quantity"] == "outer_lr" and h["replicas"] == "all"]
        fit_text = f"; fitted η* ∝ N^{fitted[0]['alpha']:.3f}·M^{fitted[0]['beta']:.3f}" if fitted else ""
        self.say(f"\n(3) The best η does not drift with N: **{'held' if common_all and parts else 'not held'}** — "
                 + "; ".join(parts) + fit_text)

    def eta_curve(self, size, m, runs=None, key="diloco.outer_lr"):
        """eta -> the lowest loss over the inner lr at that eta (seed 0 grid runs) of one cell."""
        curve = {}
        for r in runs if runs is not None else self.runs:
            if "repeat_of" in r or algorithm(r) != "diloco" or r["replicas"] != m or r["axes"].get("size") != size:
                continue
            if key in r["axes"]:
                eta = float(r["axes"][key])
                curve[eta] = min(curve.get(eta, math.inf), r["loss"] if r["loss"] is not None else math.inf)
        return curve

    def claims_4_to_6(self):
        if not self.claims:
            self.say("\n(4)–(6): the claims sweep has no results yet.")
            return
        size = self.claims[0].size
        diloco4 = self.cell(size, "diloco", 4)
        streaming = self.cell(size, "streaming", 4, self.claims)
        noloco = self.cell(size, "noloco", 4, self.claims)
        if streaming and diloco4:
            d, se = streaming.loss - diloco4.loss, self.se(streaming, diloco4)
            # "Matches": no more than 1% worse (the paper's Streaming-minus-DiLoCo margins are within it).
            v = no_worse_than(d, se, 0.01 * diloco4.loss)
            s_peak, s_total = peak_mb(os.path.join(self.args.claims, streaming.row["best_run"]))
            d_peak, d_total = peak_mb(os.path.join(self.args.study, diloco4.row["best_run"]))
            self.say(f"\n(4) Streaming DiLoCo (FP4, τ = 1) matches DiLoCo at M = 4 (here: at most 1% higher loss): **{v}** — "
                     f"{streaming.loss:.4f} against {diloco4.loss:.4f} ({100 * d / diloco4.loss:+.2f}% ± "
                     f"{200 * se / diloco4.loss:.2f}); peak {s_peak:.2f} MB against {d_peak:.2f} MB per 10 steps "
                     f"({s_peak / d_peak:.2f}×), {s_total:.1f} MB against {d_total:.1f} MB in all per replica")
        if noloco and diloco4:
            ppl = math.exp(noloco.loss - diloco4.loss) - 1
            se = self.se(noloco, diloco4)
            # Within 5% in perplexity, one-sided (a NoLoCo better than DiLoCo does not break the claim).
            v = no_worse_than(noloco.loss - diloco4.loss, se, math.log(1.05))
            self.say(f"\n(5) NoLoCo within a few percent (here: at most 5% higher perplexity, the published "
                     f"range was −1.6% to +4.8%) of DiLoCo at M = 4: **{v}** — {noloco.loss:.4f} against {diloco4.loss:.4f}, perplexity "
                     f"{100 * ppl:+.2f}% (loss difference {noloco.loss - diloco4.loss:+.4f} ± {2 * se:.4f})")
        rises = {}
        for alg, m in (("dp", 1), ("diloco", 2)):
            base = self.cell(size, alg, m)
            points = {16: base} if base else {}
            for c in self.claims:
                if c.alg == alg and (alg == "dp" or c.m == m) and "batch" in c.row["axes"]:
                    points[int(c.row["axes"]["batch"])] = c
            rises[(alg, m)] = points
        dp, dl = rises[("dp", 1)], rises[("diloco", 2)]
        if 16 in dp and 16 in dl and max(dp) == max(dl) > 16:
            big = max(dp)
            rise_dp, rise_dl = dp[big].loss - dp[16].loss, dl[big].loss - dl[16].loss
            se = self.se(dp[big], dp[16], dl[big], dl[16])
            v = verdict(rise_dl - rise_dp, se)
            self.say(f"\n(6) DiLoCo tolerates larger global batches (at fixed tokens its loss rises less from batch 16 "
                     f"to {big}): **{v}** — data parallel {rise_dp:+.4f}, DiLoCo M=2 {rise_dl:+.4f} "
                     f"(difference {rise_dl - rise_dp:+.4f} ± {2 * se:.4f}); "
                     + "; ".join(f"batch {b}: dp {dp[b].loss:.4f}, diloco {dl[b].loss:.4f}"
                                 for b in sorted(dp) if b in dl))
        self.batch_points = rises

    def spread(self, losses, size):
        """Variance of one run's loss: the group's own when it has enough seeds, else its size's pooled one."""
        if len(losses) >= 5:
            return mean_sd(losses)[1] ** 2
        return self.sigma(size) ** 2

    def against(self, losses, size, base_losses):
        """(mean, sd, gap in %, 2 SE in %, verdict) of a group of runs against a baseline group of its size."""
        (mean, sd), base = mean_sd(losses), mean_sd(base_losses)[0]
        se = math.sqrt(self.spread(losses, size) / len(losses) + self.spread(base_losses, size) / len(base_losses))
        return mean, sd, 100 * (mean / base - 1), 200 * se / base, verdict(mean - base, se)

    def diagnostics(self, directory):
        """Each setting of a diagnostics sweep (seeds pooled) against the study's data parallel cell of the
        same model size."""
        self.say(f"\n## Diagnostics ({directory})\n")
        self.say("| setting | seeds | loss, mean ± sd | data parallel, same N | gap (%, ± 2 SE) | against data parallel |")
        self.say("|---|---|---|---|---|---|")
        for name, rows in settings(directory).items():
            dp = next((c for c in self.cells if c.alg == "dp" and c.n == int(rows[0]["non_embedding_params"])), None)
            if dp is None:
                continue
            mean, sd, gap, err, v = self.against([r["loss"] for r in rows], dp.size, dp.losses)
            self.say(f"| {name} | {len(rows)} | {mean:.4f} ± {sd:.4f} | {dp.loss:.4f} ({dp.size}) | "
                     f"{gap:+.2f} ± {err:.2f} | {SIDE[v]} |")

    def confirmation(self, directory):
        """Fixed settings trained with fresh seeds (bench/sweeps/scaling-seeds.toml), each against data
        parallel of its size from the same sweep, and claims (1) and (2) again on them."""
        groups = settings(directory)
        size_of = {c.n: c.size for c in self.cells}
        dp = {int(rows[0]["non_embedding_params"]): rows for rows in groups.values() if algorithm(rows[0]) == "dp"}
        self.say(f"\n## Confirmation with fresh seeds ({directory})\n")
        self.say("| setting | N non-embedding | M | seeds | loss, mean ± sd | data parallel, same seeds | "
                 "gap (%, ± 2 SE) | against data parallel |")
        self.say("|---|---|---|---|---|---|---|---|")
        gaps = {}  # (grid, M) -> {N: (gap, 2 SE, verdict)}
        self.confirmed = {("dp", 1): {n: mean_sd([r["loss"] for r in rows]) for n, rows in dp.items()}}
        self.confirmed_gaps = gaps
        for name, rows in groups.items():
            n, alg = int(rows[0]["non_embedding_params"]), algorithm(rows[0])
            if alg == "dp" or n not in dp:
                continue
            m, base = rows[0]["replicas"], [r["loss"] for r in dp[n]]
            mean, sd, gap, err, v = self.against([r["loss"] for r in rows], size_of.get(n, ""), base)
            gaps.setdefault((name.split("_")[0], m), {})[n] = (gap, err, v)
            self.confirmed.setdefault((name.split("_")[0], m), {})[n] = (mean, sd)
            self.say(f"| {name} | {n:,} | {m} | {len(rows)} | {mean:.4f} ± {sd:.4f} | "
                     f"{mean_sd(base)[0]:.4f} ± {mean_sd(base)[1]:.4f} | {gap:+.2f} ± {err:.2f} | {SIDE[v]} |")
        for grid in sorted({g for g, _ in gaps}):
            ones = gaps.get((grid, 1), {})
            if ones:
                overall = ("held" if all(v == "held" for *_, v in ones.values())
                           else "not held" if any(v == "not held" for *_, v in ones.values()) else "not resolvable")
                self.say(f"\n(1) on `{grid}`: DiLoCo M=1 at or below data parallel at every N: **{overall}** — "
                         + "; ".join(f"{n:,}: {g:+.2f}% ± {e:.2f}" for n, (g, e, _) in sorted(ones.items())))
            for m in (2, 4):
                points = gaps.get((grid, m), {})
                if len(points) >= 2:
                    (small, a), (large, b) = min(points.items()), max(points.items())
                    v = verdict(b[0] - a[0], math.hypot(a[1], b[1]) / 2)
                    self.say(f"\n(2) on `{grid}`, M={m}: the penalty shrinks as N grows: **{v}** — {a[0]:+.2f}% ± "
                             f"{a[1]:.2f} at {small:,} → {b[0]:+.2f}% ± {b[1]:.2f} at {large:,}")

    # --- charts --------------------------------------------------------------------------------------
    def charts(self):
        out = self.args.charts
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryDirectory() as work:
            groups = [("dp", 1)] + [("diloco", m) for m in (1, 2, 4)]
            loss_series, gap_series = [], []
            for i, (alg, m) in enumerate(groups):
                path = os.path.join(work, f"loss{i}.dat")
                with open(path, "w") as f:
                    for n, size, _ in self.sizes:
                        c = self.cell(size, alg, m)
                        if c:
                            f.write(f"{n} {c.loss} {c.sd}\n")
                loss_series.append((path, group_label(alg, m), i))
                if alg == "dp":
                    continue
                path = os.path.join(work, f"gap{i}.dat")
                with open(path, "w") as f:
                    for n, size, _ in self.sizes:
                        c, dp = self.cell(size, alg, m), self.cell(size, "dp")
                        if c and dp:
                            g, e = self.gap(c, dp)
                            f.write(f"{n} {g} {e}\n")
                gap_series.append((path, group_label(alg, m), i))  # the same style as in the loss panel

            def plot(series):
                """series: (data file, title, style index); columns x, y, y error."""
                return "plot " + ", ".join(
                    f"{chart_style.quote(p)} using 1:2:3 with yerrorlines {chart_style.style(i)} "
                    f"title {chart_style.quote(t)}" for p, t, i in series)
            self.gnuplot(os.path.join(out, "scaling-loss.png"), [
                "set multiplot layout 1,2 title 'Best validation loss per (N, M), mean and sd over seeds'",
                "set logscale x", "set xlabel 'non-embedding parameters N'",
                "set ylabel 'validation loss (nats/token)'", "set key top right", plot(loss_series),
                "set ylabel 'gap to data parallel (%)'", "set arrow from graph 0, first 0 to graph 1, first 0 nohead dt 2",
                "set key top right", plot(gap_series), "unset multiplot"], 1500, 560)

            panels = []
            for n, size, _ in self.sizes:
                series = []
                for i, m in enumerate((1, 2, 4)):
                    curve = self.eta_curve(size, m)
                    path = os.path.join(work, f"eta-{size}-{m}.dat")
                    with open(path, "w") as f:
                        for eta in sorted(curve):
                            f.write(f"{eta} {curve[eta]}\n")
                    series.append(f"{chart_style.quote(path)} using 1:2 with linespoints {chart_style.style(i + 1)} "
                                  f"title 'DiLoCo M={m}'")
                dp = self.cell(size, "dp")
                dp_line = (f"{dp.row['loss_best_run']} with lines {chart_style.style(0, points=False)} dt 2 "
                           f"title 'data parallel (best)'") if dp else ""
                panels.append(f"set title 'N = {n:,} ({size})'\nplot " + ", ".join(series + ([dp_line] if dp_line else [])))
            self.gnuplot(os.path.join(out, "scaling-eta.png"), [
                f"set multiplot layout 1,{max(1, len(panels))} title 'Outer learning rate sweeps: at each eta the best "
                "inner lr (seed 0)'", "set xlabel 'outer learning rate eta'",
                "set ylabel 'validation loss (nats/token)'", "set key below",
                # room above and below, so that data parallel's line never lies on the frame
                "set offsets 0, 0, graph 0.05, graph 0.05", *panels, "unset multiplot"],
                1600, 500)

            if getattr(self, "batch_points", None):
                series = []
                for i, ((alg, m), points) in enumerate(self.batch_points.items()):
                    path = os.path.join(work, f"batch{i}.dat")
                    with open(path, "w") as f:
                        for b in sorted(points):
                            f.write(f"{b} {points[b].loss} {points[b].sd}\n")
                    series.append((path, group_label(alg, m), i))
                self.gnuplot(os.path.join(out, "scaling-batch.png"), [
                    "set title 'Global batch at a fixed token budget (N = 332K non-embedding, 965K tokens)'",
                    "set logscale x 2", "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05",
                    "set xlabel 'global batch (sequences of 128 tokens)'",
                    "set ylabel 'validation loss (nats/token)'", "set key top left", plot(series)], 800, 520)
            if getattr(self, "confirmed", None):
                self.confirmation_chart(os.path.join(out, "scaling-confirmation.png"), work, plot)
        self.say(f"\nCharts: {out}/scaling-loss.png, {out}/scaling-eta.png, {out}/scaling-batch.png"
                 + (f", {out}/scaling-confirmation.png" if getattr(self, "confirmed", None) else ""))

    def confirmation_chart(self, png, work, plot):
        """Loss and gap to data parallel against N for every setting of the confirmation sweep."""
        loss_series, gap_series = [], []
        for i, (grid, m) in enumerate(sorted(self.confirmed, key=lambda k: (k[0] != "dp", k))):
            title = "data parallel" if grid == "dp" else f"{GRID_TITLES.get(grid, grid)}, M={m}"
            path = os.path.join(work, f"confirmed{i}.dat")
            with open(path, "w") as f:
                f.writelines(f"{n} {mean} {sd}\n" for n, (mean, sd) in sorted(self.confirmed[(grid, m)].items()))
            loss_series.append((path, title, i))
            if grid == "dp":
                continue
            path = os.path.join(work, f"confirmed-gap{i}.dat")
            with open(path, "w") as f:
                f.writelines(f"{n} {gap} {err / 2}\n" for n, (gap, err, _) in sorted(self.confirmed_gaps[(grid, m)].items()))
            gap_series.append((path, title, i))
        self.gnuplot(png, [
            "set multiplot layout 1,2 title 'Confirmation with 8 fresh seeds: mean and sd (left), gap and its standard error (right)'",
            "set logscale x", "set xlabel 'non-embedding parameters N'", "set ylabel 'validation loss (nats/token)'",
            "set key top right", plot(loss_series),
            "set ylabel 'gap to data parallel (%)'", "set arrow from graph 0, first 0 to graph 1, first 0 nohead dt 2",
            "set key top left", plot(gap_series), "unset multiplot"], 1500, 560)

    def gnuplot(self, png, lines, width, height):
        script = "\n".join([f"set terminal pngcairo size {width},{height}", f"set output {chart_style.quote(png)}",
                            "set termoption noenhanced", "set grid", "set key font ',9'", *lines])
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
        except FileNotFoundError:
            self.say("(no charts: gnuplot is not installed; apt-get install gnuplot-nox)")
        except subprocess.CalledProcessError as e:
            sys.exit(f"scaling_study_report: gnuplot failed on {png}: {e.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study")
    parser.add_argument("claims", nargs="?")
    parser.add_argument("--diagnostics", default=None)
    parser.add_argument("--confirmation", default=None)
    parser.add_argument("--loco", default="build/loco")
    parser.add_argument("--charts", default=None)
    args = parser.parse_args()
    args.charts = args.charts or args.study
    report = Report(args)
    if not report.cells:
        sys.exit(f"scaling_study_report: {args.study}/cells.jsonl has no cells yet (run loco sweep first)")
    report.say("## Results\n")
    report.tables()
    report.fits()
    report.claims_section()
    if args.diagnostics:
        report.diagnostics(args.diagnostics)
    if args.confirmation:
        report.confirmation(args.confirmation)
    report.charts()
    print("\n".join(report.lines))


if __name__ == "__main__":
    main()
