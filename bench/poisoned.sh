#!/usr/bin/env bash
# The poisoned-replica benchmark (issue 13; docs/results.md "Robust aggregation under a bad replica"):
#
#   bench/poisoned.sh [OUT_DIR]          default runs/poisoned; JOBS runs at a time (default 2)
#
# 1. Trains the runs of bench/convergence/poisoned.txt with bench/convergence.sh: DiLoCo, 4 replicas as
#    threads, one of which turns bad after step 100 (dist.adversary: x100, sign-flipped, or noise of the same
#    norm), for each aggregation rule, and the same runs without the bad replica.
# 2. Prints each rule's final validation loss under each attack against the clean mean run, and draws
#    OUT_DIR/poisoned.png (bench/poisoned_report.py).
# 3. Times the outer step of each rule against the mean's (build/loco_outer_step_bench, 4 replicas as
#    threads on this machine's cores, on the benchmark's model and on bench/configs/small-5m.toml).
# A finished run is skipped, so an interrupted benchmark continues. Needs build/loco,
# build/loco_outer_step_bench and data/brown (scripts/quickstart.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/poisoned}
# LIST=bench/convergence/poisoned_sparse.txt: the same attacks on SparseLoCo, whose rules are timed with
# its algorithm.
list=${LIST:-bench/convergence/poisoned.txt}
algorithm=diloco
rules="mean clip trimmed_mean median centered_clip"
if grep -q 'dist.algorithm=sparseloco' "$list"; then algorithm=sparseloco; rules="mean clip median"; fi
bench=${BENCH:-build/loco_outer_step_bench}
[ -x "$bench" ] || { echo "poisoned: $bench is missing; run scripts/setup.sh build" >&2; exit 2; }
REPORT=0 bench/convergence.sh "$list" "$out"
vocab=$(/usr/bin/python3 -c 'import json; print(json.load(open("data/brown/meta.json"))["vocab_size"])')
timings=$out/outer_step_times.jsonl
: >"$timings"
for model in configs/tiny.toml bench/configs/small-5m.toml; do
  for rule in $rules; do
    "$bench" "$model" --replicas 4 --batch 4 --seq 128 --repeats 5 --every 30 --set "model.vocab_size=$vocab" \
      --set "dist.algorithm=$algorithm" --set "dist.aggregation=$rule" | sed "s|^{|{\"model\":\"$model\",|" >>"$timings"
  done
done
/usr/bin/python3 bench/poisoned_report.py "$out" "$list" "$timings"
