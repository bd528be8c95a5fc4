#!/usr/bin/env bash
# Training throughput of two loco binaries (e.g. main's build before a change and after it) on the
# throughput benchmark's configs, alternating old and new (which goes first alternates too) so that both
# see the same machine moments.
# Prints one line per run: model, repeat, side, tokens/s (from metrics.jsonl, start-up excluded, as
# bench/throughput.sh reads it), and the last logged loss and gradient norm (a change that should keep
# the numerics shows the same losses).
#
#   bench/ab_throughput.sh OLD_LOCO NEW_LOCO [REPEATS]     (REPEATS default 3)
#
# Data as bench/throughput.sh: data/brown (BPE 4096) and data/brown-bytes (made if missing).
# Environment: THREADS (2), STEPS_TINY (60), STEPS_SMALL (20), BENCH_ENV=tuned|inherit (tuned).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "ab_throughput.sh: $*" >&2; exit 2; }
(($# >= 2)) || die "usage: bench/ab_throughput.sh OLD_LOCO NEW_LOCO [REPEATS]"
OLD=$(realpath -m "$1") NEW=$(realpath -m "$2") REPEATS=${3:-3}
[[ -f "$OLD" && -x "$OLD" && -f "$NEW" && -x "$NEW" ]] || die "both binaries must be executable files ($OLD, $NEW)"
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || die "REPEATS must be a positive integer, got '$REPEATS'"
for steps in "${STEPS_TINY:-60}" "${STEPS_SMALL:-20}"; do
  # The rate spans logged steps (every 5): at least two after start-up.
  [[ "$steps" =~ ^[0-9]+$ ]] && ((steps >= 10)) || die "STEPS_TINY and STEPS_SMALL must be whole numbers >= 10"
done
THREADS=${THREADS:-2}
DATA_DIR=$ROOT/data/brown BYTE_DATA_DIR=$ROOT/data/brown-bytes
[[ -f "$DATA_DIR/meta.json" ]] || die "no $DATA_DIR/meta.json (scripts/quickstart.sh prepares it)"
if [[ ! -f "$BYTE_DATA_DIR/meta.json" ]]; then
  "$NEW" prepare --input "$ROOT/data/brown-text" --out "$BYTE_DATA_DIR" --tokenizer byte --val-fraction 0.02 \
    >/dev/null || die "cannot prepare $BYTE_DATA_DIR (run scripts/fetch_brown.sh data/brown-text)"
fi
if [[ "${BENCH_ENV:-tuned}" == tuned ]]; then  # see bench/throughput.sh
  export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 OMP_WAIT_POLICY=PASSIVE
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; threads $THREADS;" \
  "load average before start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD"
echo "new: $NEW"
for ((rep = 1; rep <= REPEATS; ++rep)); do
  for run in "tiny-150k:${STEPS_TINY:-60}:$BYTE_DATA_DIR" "small-5m:${STEPS_SMALL:-20}:$DATA_DIR"; do
    IFS=: read -r name steps data <<<"$run"
    sides=(old new)
    ((rep % 2 == 0)) && sides=(new old)  # old first in odd repeats, new first in even ones
    for side in "${sides[@]}"; do
      binary=$OLD
      [[ $side == new ]] && binary=$NEW
      out=$WORK/$side-$name-$rep
      "$binary" train --config "$ROOT/bench/configs/$name.toml" --set "data.dir=$data" --set "train.steps=$steps" \
        --set "train.out_dir=$out" --set "train.threads=$THREADS" --set train.eval_every=0 \
        --set train.log_every=5 >"$WORK/log" 2>&1 || { tail -n 20 "$WORK/log" >&2; die "$side failed on $name"; }
      python3 - "$out/metrics.jsonl" "$name" "$rep" "$side" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
rows = [r for r in rows if "elapsed_s" in r]
first, last = rows[0], rows[-1]
rate = (last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"])
print(f"{sys.argv[2]} repeat {sys.argv[3]} {sys.argv[4]}: {rate:,.0f} tokens/s, "
      f"loss {last['loss']:.7f}, grad_norm {last['grad_norm']:.6f} at step {last['step']}")
EOF
      rm -rf "$out"
    done
  done
done
