#!/usr/bin/env bash
# Issue 38 on one GPU: the same model trained by one process and by S pipeline stages as S processes
# sharing the GPU (`loco launch --nproc S`, dist.backend = gloo: activations cross through host memory, the
# path between GPUs without NCCL), in one run: s/step, tokens/s, each stage's bubble and activation bytes,
# and each process's peak GPU memory (nvidia-smi, sampled every 0.2 s). NCCL refuses two ranks on one
# device, so NCCL between stages needs two GPUs: not measured here. Prepared on the CPU machine; see
# docs/results.md ("Pipeline stages") for what was measured.
#
#   bench/gpu_pipeline.sh [BUILD_DIR] [DATA_DIR]
#       defaults: build-cuda, data/brown
#
# Environment: CONFIG (configs/llama-125m.toml), STAGES (2), STEPS (20: s/step over steps 6..STEPS),
# BATCH (32 sequences a step), MICRO (4 per micro-batch: m = 8), SEQ (1024), TIMEOUT_S (300 per run),
# DEVICE (cuda) and AUTOCAST (bf16): DEVICE=cpu AUTOCAST=none tries the script's plumbing on a CPU machine
# (with an nvidia-smi that prints nothing on the PATH).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$(realpath -m "${1:-$ROOT/build-cuda}")
DATA_DIR=$(realpath -m "${2:-$ROOT/data/brown}")
CONFIG=$(realpath -m "${CONFIG:-$ROOT/configs/llama-125m.toml}")
STAGES=${STAGES:-2}
STEPS=${STEPS:-20}
BATCH=${BATCH:-32}
MICRO=${MICRO:-4}
SEQ=${SEQ:-1024}
TIMEOUT_S=${TIMEOUT_S:-300}
DEVICE=${DEVICE:-cuda}
AUTOCAST=${AUTOCAST:-bf16}
die() { echo "gpu_pipeline.sh: $*" >&2; exit 2; }
[[ -x "$BUILD_DIR/loco" ]] || die "no loco binary at $BUILD_DIR/loco (scripts/build_gpu.sh first)"
[[ -f "$DATA_DIR/meta.json" ]] || die "no $DATA_DIR/meta.json (prepare data, or pass DATA_DIR)"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this benchmark needs a GPU"
((STEPS >= 10)) || die "STEPS must be at least 10 (s/step is the median over steps 6..STEPS)"
WORK=$(mktemp -d)
sampler=""
trap 'kill $sampler 2>/dev/null; rm -rf "$WORK"' EXIT

echo "device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1); $(nproc) CPU cores"
echo "config: $CONFIG; $BATCH sequences of $SEQ tokens a step in micro-batches of $MICRO; $DEVICE, autocast $AUTOCAST"
common=(train --config "$CONFIG" --set "data.dir=$DATA_DIR" --set train.tokens=0 --set "train.steps=$STEPS"
        --set "train.batch_size=$BATCH" --set "train.micro_batch_size=$MICRO" --set "data.seq_len=$SEQ"
        --set train.eval_every=0 --set train.eval_batches=1 --set train.log_every=1 --set train.checkpoint_every=0
        --set "train.device=$DEVICE" --set "train.autocast=$AUTOCAST")

# Peak GPU memory (MiB) per process while a run lasts: "pid MiB" lines, the largest sample of each pid.
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 200 >"$WORK/memory.csv" 2>/dev/null &
sampler=$!
lines() { wc -l <"$WORK/memory.csv"; }
peaks() {  # the peak of each process seen in samples $1..$2 of the file, largest first
  /usr/bin/python3 - "$WORK/memory.csv" "$1" "$2" <<'PY'
import sys
peak = {}
for line in open(sys.argv[1]).readlines()[int(sys.argv[2]):int(sys.argv[3])]:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        peak[parts[0]] = max(peak.get(parts[0], 0), int(parts[1]))
print(" ".join(str(v) for v in sorted(peak.values(), reverse=True)) or "-")
PY
}

# Median s/step over steps 6..N, mean bubble and activation MB per step of one stage's metrics.jsonl.
summary() {
  /usr/bin/python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
times = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rows, rows[1:]) if b["step"] > 5]
bubble = statistics.mean(r.get("pipeline_bubble", 0) for r in rows if r["step"] > 5)
print(f"{statistics.median(times):.4f} {bubble:.3f} {rows[-1].get('activation_bytes', 0) / rows[-1]['step'] / 1e6:.2f}")
PY
}

tokens=$((BATCH * SEQ))
from=$(lines)
timeout "$TIMEOUT_S" "$BUILD_DIR/loco" "${common[@]}" --set "train.out_dir=$WORK/one" >"$WORK/one.log" 2>&1 ||
  { tail -5 "$WORK/one.log"; die "the one-process run failed"; }
one_peak=$(peaks "$from" "$(lines)")
read -r one_s _ _ <<<"$(summary "$WORK/one")"
echo "| run | s/step | tokens/s | x one process | bubble (stages) | activation MB/step (stage 0) | peak GPU MiB per process |"
echo "|---|---|---|---|---|---|---|"
echo "| one process | $one_s | $(echo "$tokens / $one_s" | bc) | 1.00 | - | - | $one_peak |"

from=$(lines)
timeout "$TIMEOUT_S" "$BUILD_DIR/loco" launch --nproc "$STAGES" -- "${common[@]}" --set dist.backend=gloo \
  --set "dist.stages=$STAGES" --set "train.out_dir=$WORK/stages" >"$WORK/stages.log" 2>&1 ||
  { tail -20 "$WORK/stages.log"; die "the $STAGES-stage run failed"; }
stage_peaks=$(peaks "$from" "$(lines)")
read -r step_s _ bytes <<<"$(summary "$WORK/stages")"
bubbles=""
for ((s = 0; s < STAGES; s++)); do
  dir="$WORK/stages"; ((s > 0)) && dir="$dir/stage_$s"
  read -r _ b _ <<<"$(summary "$dir")"
  bubbles+="$b "
done
echo "| $STAGES stages (gloo, host copies) | $step_s | $(echo "$tokens / $step_s" | bc) | $(echo "scale=2; $one_s / $step_s" | bc) | ${bubbles% } | $bytes | $stage_peaks |"
