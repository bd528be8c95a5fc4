#!/usr/bin/env bash
# `loco prepare` on generated JSONL corpora of growing size: wall time, MB/s of input and peak
# resident memory (issue 15's goals: at most 1.5 GB at 2 GB of input and no growth at twice that;
# at least twice the MB/s of the previous prepare on the 106 MB case). See bench/README.md.
#
#   bench/prepare_scale.sh [--baseline OLD_LOCO] [--sizes "106 2000 4000"] [--zst 2000] [WORK_DIR]
#
# The corpora come from bench/make_jsonl_corpus.py (Brown paragraphs, about 2.7 KB a document,
# seeded); WORK_DIR (default /tmp/loco-prepare-bench) holds them and the prepared outputs, which are
# deleted after each run (about 2.5x the largest size of disk is needed). --zst also prepares the
# zstd-compressed form of that size. --baseline runs another loco binary (e.g. one built from a
# commit before the streaming prepare) on the sizes up to --baseline-max MB (default 1000), as the
# peer in the same run. Every run prepares with the defaults (BPE 8192, --val-fraction 0.01).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCO=$ROOT/build/loco
BASELINE=""
BASELINE_MAX=1000
SIZES="106 2000 4000"
ZST_SIZE=2000
while (($#)); do
  case $1 in
    --baseline) BASELINE=$(realpath "$2"); shift 2 ;;
    --baseline-max) BASELINE_MAX=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --zst) ZST_SIZE=$2; shift 2 ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) break ;;
  esac
done
WORK=$(realpath -m "${1:-/tmp/loco-prepare-bench}")
die() { echo "prepare_scale.sh: $*" >&2; exit 2; }
[[ -x $LOCO ]] || die "no loco binary at $LOCO (run scripts/setup.sh first)"
[[ -d $ROOT/data/brown-text ]] || die "no data/brown-text (run scripts/fetch_brown.sh data/brown-text)"
command -v zstd >/dev/null || die "the zstd tool is missing (scripts/setup.sh installs it)"
mkdir -p "$WORK"

# Runs one prepare and prints a table row: wall seconds, MB/s of JSONL text (the uncompressed size,
# TEXT_FILE, also for a .zst input), peak RSS of the process.
measure() {  # NAME BINARY INPUT TEXT_FILE
  local name=$1 binary=$2 input=$3 out=$WORK/out
  rm -rf "$out"
  python3 - "$name" "$binary" "$input" "$out" "$4" <<'PY'
import os, resource, subprocess, sys, time
name, binary, source, out, text = sys.argv[1:]
start = time.monotonic()
run = subprocess.run([binary, "prepare", "--input", source, "--out", out],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
wall = time.monotonic() - start
if run.returncode != 0:
    sys.exit(f"{name}: loco prepare failed:\n{run.stdout}")
peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
size_mb, text_mb = os.path.getsize(source) / 1e6, os.path.getsize(text) / 1e6
print(f"| {name} | {size_mb:.0f} | {wall:.1f} | {text_mb / wall:.1f} | {peak_mb:.0f} |", flush=True)
PY
  rm -rf "$out"
}

echo "prepare_scale.sh on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(date -u +%F)"
echo "| run | input MB on disk | wall s | MB/s of JSONL | peak RSS MB |"
echo "|---|---|---|---|---|"
for size in $SIZES; do
  corpus=$WORK/corpus-$size.jsonl
  [[ -f $corpus ]] || python3 "$ROOT/bench/make_jsonl_corpus.py" "$ROOT/data/brown-text" "$corpus" "$size" >/dev/null
  if [[ -n $BASELINE ]] && ((size <= BASELINE_MAX)); then measure "baseline $size MB" "$BASELINE" "$corpus" "$corpus"; fi
  measure "loco $size MB" "$LOCO" "$corpus" "$corpus"
  if [[ $size == "$ZST_SIZE" ]]; then
    [[ -f $corpus.zst ]] || zstd -q -T0 -3 "$corpus" -o "$corpus.zst"
    measure "loco $size MB as .zst" "$LOCO" "$corpus.zst" "$corpus"
  fi
done
