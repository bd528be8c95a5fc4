#!/usr/bin/env bash
# The scaling-law study of docs/scaling-study.md, end to end: prepares data/brown-study (the Brown corpus
# with a 10% validation split, 50 documents, so that every run is scored on 170K tokens; with --profile
# sotu, data/sotu-study from the State of the Union addresses), runs
# bench/sweeps/scaling-study.toml and bench/sweeps/scaling-claims.toml with loco sweep, then writes the
# report (bench/scaling_study_report.py) and its charts. Resumable: run it again after an interruption and
# only the runs without a result are redone. Prints the wall time of each part.
#
# Usage: bench/scaling_study.sh [--jobs N] [--profile NAME] [--report-only] [--charts DIR]
#   LOCO=path/to/loco (default build/loco); the report goes to runs/scaling-study/report.md
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=2
profile=()
report_only=0
charts=runs/scaling-study
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --profile) profile=(--profile "$2"); shift 2 ;;
    --report-only) report_only=1; shift ;;
    --charts) charts=$2; shift 2 ;;
    *) echo "usage: $0 [--jobs N] [--profile NAME] [--report-only] [--charts DIR]" >&2; exit 2 ;;
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

if [ "$report_only" -eq 0 ]; then
  case ${profile[1]:-} in
    "") prepare brown fetch_brown.sh ;;
    sotu) prepare sotu fetch_sotu.sh ;;
  esac
  for sweep in scaling-study scaling-claims; do
    [ ${#profile[@]} -gt 0 ] && [ "$sweep" = scaling-claims ] && continue  # the claims are CPU-sized
    start=$(date +%s)
    "$loco" sweep "bench/sweeps/$sweep.toml" --jobs "$jobs" "${profile[@]}"
    echo "scaling_study: $sweep took $(( $(date +%s) - start )) s with --jobs $jobs on $(nproc) cores"
  done
fi
out=runs/scaling-study claims=(runs/scaling-claims)
if [ ${#profile[@]} -gt 0 ]; then out=runs/scaling-study-${profile[1]}; claims=(); fi
[ "$charts" = runs/scaling-study ] && charts=$out
python3 bench/scaling_study_report.py "$out" "${claims[@]}" --loco "$loco" --charts "$charts" | tee "$out/report.md"
