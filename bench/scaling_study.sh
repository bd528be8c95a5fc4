#!/usr/bin/env bash
# The scaling-law study of docs/scaling-study.md, end to end: prepares data/brown-study (the Brown corpus
# with a 10% validation split, 50 documents, so that every run is scored on 170K tokens; with --profile
# sotu, data/sotu-study from the State of the Union addresses), runs bench/sweeps/scaling-study.toml and
# scaling-claims.toml with loco sweep (with --profile NAME, each of them that has a [profile.NAME], into
# runs/SWEEP-NAME; with --diagnose also scaling-diagnostics.toml, the runs that tell the regime from a
# hyperparameter; with --confirm also scaling-seeds.toml, the best settings again with 8 fresh seeds), then
# writes the report (bench/scaling_study_report.py) and its charts. Resumable: run it again after an
# interruption and only the runs without a result are redone.
# Prints the wall time of each part.
#
# Usage: bench/scaling_study.sh [--jobs N] [--profile NAME] [--diagnose] [--confirm] [--report-only] [--charts DIR]
#   --jobs N      runs at a time (default: each sweep file's own `jobs`)
#   --profile     gpu (larger models on GPUs), cuda (these runs on one GPU), sotu (the second corpus)
#   --diagnose    also the diagnostics (37 runs: ~90 s on an H100, ~30 min on 2 cores)
#   --confirm     also the confirmation with fresh seeds (168 runs: ~6 min on an H100, ~2.5 h on 2 cores)
#   LOCO=path/to/loco (default build/loco); the report goes to runs/scaling-study[-NAME]/report.md
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=()
profile=()
report_only=0
confirm=0
diagnose=0
charts=runs/scaling-study
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=(--jobs "$2"); shift 2 ;;
    --profile) profile=(--profile "$2"); shift 2 ;;
    --diagnose) diagnose=1; shift ;;
    --confirm) confirm=1; shift ;;
    --report-only) report_only=1; shift ;;
    --charts) charts=$2; shift 2 ;;
    *) echo "usage: $0 [--jobs N] [--profile NAME] [--diagnose] [--confirm] [--report-only] [--charts DIR]" >&2; exit 2 ;;
  esac
done
loco=${LOCO:-build/loco}
[ -x "$loco" ] || { echo "scaling_study: $loco is missing; build it first (scripts/setup.sh)" >&2; exit 1; }

# A corpus as the study reads it: its own BPE-4096 vocabulary and a 10% validation split.
prepare() {  # NAME FETCH_SCRIPT
  [ -f "data/$1-study/meta.json" ] && return
  "scripts/$2" "data/$1-text"
  "$loco" prepare --input "data/$1-text" --out "data/$1-study" --vocab-size 4096 --val-fraction 0.1
}

suffix=${profile[1]:+-${profile[1]}}
sweeps=()
candidates=(scaling-study scaling-claims)
[ "$diagnose" -eq 1 ] && candidates+=(scaling-diagnostics)
[ "$confirm" -eq 1 ] && candidates+=(scaling-seeds)
for sweep in "${candidates[@]}"; do
  if [ ${#profile[@]} -eq 0 ] || grep -q "^\[profile\.${profile[1]}\]" "bench/sweeps/$sweep.toml"; then
    sweeps+=("$sweep")
  fi
done
[ ${#sweeps[@]} -gt 0 ] || { echo "scaling_study: no sweep file has [profile.${profile[1]}]" >&2; exit 2; }

if [ "$report_only" -eq 0 ]; then
  case ${profile[1]:-} in
    sotu) prepare sotu fetch_sotu.sh ;;
    gpu) ;;  # its own corpus, data/study-corpus (the profile's comment)
    *) prepare brown fetch_brown.sh ;;
  esac
  for sweep in "${sweeps[@]}"; do
    start=$(date +%s)
    "$loco" sweep "bench/sweeps/$sweep.toml" "${jobs[@]}" "${profile[@]}"
    echo "scaling_study: $sweep$suffix took $(( $(date +%s) - start )) s on $(nproc) cores"
  done
fi
out=runs/scaling-study$suffix
extra=()
[ -d "runs/scaling-claims$suffix" ] && extra+=("runs/scaling-claims$suffix")
[ -d "runs/scaling-diagnostics$suffix" ] && extra+=(--diagnostics "runs/scaling-diagnostics$suffix")
[ -d "runs/scaling-seeds$suffix" ] && extra+=(--confirmation "runs/scaling-seeds$suffix")
[ "$charts" = runs/scaling-study ] && charts=$out
python3 bench/scaling_study_report.py "$out" "${extra[@]}" --loco "$loco" --charts "$charts" | tee "$out/report.md"
