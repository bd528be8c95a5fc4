#!/usr/bin/env bash
# Convergence experiments on the Brown corpus (issue 5; results in docs/results.md "Algorithms").
#
#   bench/convergence.sh [RUN_LIST] [OUT_DIR]     defaults: bench/convergence/runs.txt runs/convergence
#
# Runs every line of RUN_LIST (name + `loco train --set` overrides) on configs/tiny.toml with a
# global batch of 16 x 128 tokens split across replicas, 400 steps, an emulated 100 Mbit/s link and
# one intra-op thread per replica, DiLoCo's built-in eta 0.7 and mu 0.9 (configs/tiny.toml now sets 0.5 and
# 0.5; the documented results used these), JOBS (default 2) runs at a time; a run whose directory already has a final
# checkpoint is skipped, so an interrupted sweep continues. Then prints the summary table
# (bench/convergence_report.py) and draws the charts. DATA (default data/brown) names another prepared
# corpus, SEED (default: the config's) another train.seed. Needs build/loco and data/brown
# (scripts/quickstart.sh makes both).
set -euo pipefail
cd "$(dirname "$0")/.."
list=${1:-bench/convergence/runs.txt}
out=${2:-runs/convergence}
steps=${STEPS:-400}
loco=${LOCO:-build/loco}  # a copy keeps a sweep independent of rebuilds
[ -x "$loco" ] || { echo "convergence: $loco is missing; run scripts/setup.sh build" >&2; exit 2; }
data=${DATA:-data/brown}
[ -f "$data/meta.json" ] || { echo "convergence: $data is missing (data/brown: run scripts/quickstart.sh once)" >&2; exit 2; }
mkdir -p "$out"

run_one() {
  local name=$1; shift
  local dir=$out/$name
  if ls -d "$dir"/checkpoints/step_"$steps" >/dev/null 2>&1; then echo "skip $name (done)"; return; fi
  rm -rf "$dir"
  local sets=()
  if [ -n "${SEED:-}" ]; then sets+=(--set "train.seed=$SEED"); fi
  for o in "$@"; do sets+=(--set "$o"); done
  if "$loco" train --config configs/tiny.toml --set train.out_dir="$dir" --set train.steps="$steps" \
      --set data.dir="$data" \
      --set train.batch_size=16 --set train.threads=1 --set train.eval_every=100 --set train.log_every=10 \
      --set comm.bandwidth_mbps=100 --set diloco.outer_lr=0.7 --set diloco.outer_momentum=0.9 \
      "${sets[@]}" >"$dir.log" 2>&1; then
    # The whole validation split, the same tokens for every run (the final checkpoint holds the
    # parameters a user would deploy: every strategy syncs at the last step).
    "$loco" eval --checkpoint "$dir/checkpoints/step_$steps" --data "$data" --batches 1000 --batch-size 16 \
      2>/dev/null | grep '^{' >"$dir/final_eval.json"
    echo "done $name: $(cat "$dir/final_eval.json")"
  else
    echo "FAILED $name (see $dir.log)" >&2
    return 1
  fi
}
export -f run_one
export out steps loco data

grep -v '^#' "$list" | grep -v '^\s*$' | xargs -P "${JOBS:-2}" -L 1 bash -c 'run_one "$@"' _
# REPORT=0: the caller reports (bench/poisoned.sh).
if [ "${REPORT:-1}" = 1 ]; then /usr/bin/python3 bench/convergence_report.py "$out" "$list"; fi
