#!/usr/bin/env bash
# Training throughput of `loco train` against a plain PyTorch loop (bench/torch_loop.py) on the
# same configs, data and thread count, plus the measured matmul peak. See bench/README.md.
#
#   bench/throughput.sh [BUILD_DIR] [DATA_DIR] [BYTE_DATA_DIR]
#       defaults: build, data/brown (BPE 4096), data/brown-bytes (byte tokenizer, made if missing)
#
# The ~150K-parameter model runs on byte-level data, where its embedding is small (vocab 258);
# with a BPE vocabulary the embedding alone would be several times the model.
# Environment: STEPS_TINY (default 60), STEPS_SMALL (default 20), THREADS (default 2),
# BENCH_ENV=tuned|inherit (default tuned: the allocator/OpenMP settings below, for both sides).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$(realpath -m "${1:-$ROOT/build}")
DATA_DIR=$(realpath -m "${2:-$ROOT/data/brown}")
BYTE_DATA_DIR=$(realpath -m "${3:-$ROOT/data/brown-bytes}")
PY=/usr/bin/python3
THREADS=${THREADS:-2}
RUNS=("tiny-150k:${STEPS_TINY:-60}:$BYTE_DATA_DIR" "small-5m:${STEPS_SMALL:-20}:$DATA_DIR")

die() { echo "throughput.sh: $*" >&2; exit 2; }
[[ -x "$BUILD_DIR/loco" ]] || die "no loco binary at $BUILD_DIR/loco (build first, or pass BUILD_DIR)"
[[ -f "$DATA_DIR/meta.json" ]] || die "no $DATA_DIR/meta.json (run loco prepare, or pass DATA_DIR)"
if [[ ! -f "$BYTE_DATA_DIR/meta.json" ]]; then
  "$BUILD_DIR/loco" prepare --input "$ROOT/data/brown-text" --out "$BYTE_DATA_DIR" --tokenizer byte \
    --val-fraction 0.02 >/dev/null || die "cannot prepare $BYTE_DATA_DIR (run scripts/fetch_brown.sh data/brown-text)"
fi

# Both sides use glibc malloc and libgomp, so these settings apply to both equally. On the
# Firecracker VMs these benchmarks run on, faulting in fresh pages costs ~10 us each: without them
# every large temporary (the (B*T, vocab) logits) is mmap'd, faulted in and unmapped each step,
# and that, not arithmetic, dominates. See bench/README.md "Environment".
if [[ "${BENCH_ENV:-tuned}" == tuned ]]; then
  export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 OMP_WAIT_POLICY=PASSIVE
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores;" \
  "load average before start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "env: MALLOC_MMAP_MAX_=${MALLOC_MMAP_MAX_-unset} MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_-unset}" \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY-unset}; threads $THREADS"

$PY "$ROOT/bench/matmul_peak.py" --threads "$THREADS" >"$WORK/peak.json"

for run in "${RUNS[@]}"; do
  IFS=: read -r name steps data <<<"$run"
  config="$ROOT/bench/configs/$name.toml"
  ((steps >= 10)) || die "$name: need at least 10 steps (loco logs every 5; the rate spans logs)"
  echo "== $name: loco train, $steps steps" >&2
  if ! "$BUILD_DIR/loco" train --config "$config" --set "data.dir=$data" \
      --set "train.steps=$steps" --set "train.out_dir=$WORK/$name-run" \
      --set "train.threads=$THREADS" --set train.eval_every=0 --set train.log_every=5 \
      >"$WORK/$name-loco.log" 2>&1; then
    tail -n 20 "$WORK/$name-loco.log" >&2
    die "loco train failed on $name (log above)"
  fi
  cp "$WORK/$name-run/metrics.jsonl" "$WORK/$name-metrics.jsonl" \
    || die "loco wrote no $WORK/$name-run/metrics.jsonl"
  echo "== $name: torch_loop.py, 3 + $steps steps" >&2
  $PY "$ROOT/bench/torch_loop.py" --config "$config" --data "$data" --steps "$steps" \
    --threads "$THREADS" >"$WORK/$name-torch.json"
done

$PY - "$WORK" "${RUNS[@]%%:*}" <<'EOF'
import json, sys

work, names = sys.argv[1], sys.argv[2:]
peak = json.load(open(f"{work}/peak.json"))


def loco_throughput(path):
    """(tokens_last - tokens_first) / (elapsed_last - elapsed_first): excludes start-up."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in rows if "tokens" in r and "elapsed_s" in r]
    if len(rows) < 2:
        sys.exit(f"throughput.sh: {path} has fewer than 2 logged steps")
    first, last = rows[0], rows[-1]
    return (last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"]), last


print(f"matmul peak (fp32, {peak['threads']} threads): {peak['peak_gflops']:.1f} GFLOP/s "
      f"{peak['gflops_by_size']}")
print("FLOPs/token = 6*N_nonembedding + 6*vocab*hidden (lm_head) + 12*layers*seq_len*hidden "
      "(attention scores and values)")
header = ("model", "params", "loco tok/s", "pytorch tok/s", "loco/pytorch", "loco GFLOP/s",
          "pytorch GFLOP/s", "loco %peak", "pytorch %peak", "loco loss", "pytorch loss")
rows = []
for name in names:
    torch_run = json.load(open(f"{work}/{name}-torch.json"))
    loco_tps, loco_last = loco_throughput(f"{work}/{name}-metrics.jsonl")
    flops = (6 * torch_run["nonembedding_params"]
             + 6 * torch_run["vocab_size"] * torch_run["hidden_size"]
             + 12 * torch_run["num_hidden_layers"] * torch_run["seq_len"] * torch_run["hidden_size"])
    torch_tps = torch_run["tokens_per_s"]
    loco_gf, torch_gf = loco_tps * flops / 1e9, torch_tps * flops / 1e9
    rows.append((name, f"{torch_run['params']:,}", f"{loco_tps:,.0f}", f"{torch_tps:,.0f}",
                 f"{loco_tps / torch_tps:.2f}", f"{loco_gf:.1f}", f"{torch_gf:.1f}",
                 f"{100 * loco_gf / peak['peak_gflops']:.1f}%",
                 f"{100 * torch_gf / peak['peak_gflops']:.1f}%",
                 f"{loco_last.get('loss', float('nan')):.3f}", f"{torch_run['final_loss']:.3f}"))
widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
for r in [header, tuple("-" * w for w in widths)] + rows:
    print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
EOF
