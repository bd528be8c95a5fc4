#!/usr/bin/env bash
# One device session on a lent GPU machine in one command (docs/build.md "GPU builds"): builds loco against
# the machine's PyTorch (scripts/build_gpu.sh; if that build fails, the compile errors are kept and it builds
# again with -DLOCO_CUDA_GRAPHS=OFF, so that the rest still runs), runs the tests that need a GPU, trains a
# two-replica DiLoCo run with and without CUDA graphs, then measures with bench/gpu_throughput.sh.
#
#   scripts/gpu_session.sh CARRY_DIR OUT_DIR [PART]
#
# PART: 125m (build, tests, DiLoCo check, throughput at 125M with graphs on and off, the micro-benchmarks),
# 350m (throughput at 350M only, on an earlier call's build), all (default: both, the 350M part only if
# at least 220 s of BUDGET_S, default 560, are left). Every step is bounded in time and says when it
# started; OUT_DIR gets the logs and results.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARRY=$(realpath "${1:?CARRY_DIR}")
OUT=$(realpath -m "${2:?OUT_DIR}")
PART=${3:-all}
BUDGET_S=${BUDGET_S:-560}
BUILD=$ROOT/build-cuda
DATA=$CARRY/data/brown
mkdir -p "$OUT"
start=$SECONDS
stamp() { echo "[$((SECONDS - start)) s] $*"; }

if [[ $PART != 350m ]]; then
  stamp "build"
  targets="--target loco loco_torch_tests loco_head_loss_bench loco_projections_bench loco_outer_step_bench"
  if ! BUILD_ARGS="$targets -- -k 0" "$ROOT/scripts/build_gpu.sh" "$CARRY" "$BUILD" >"$OUT/build.log" 2>&1; then
    stamp "build failed; its errors:"
    grep -E "error|Error" "$OUT/build.log" | head -40
    stamp "building again with -DLOCO_CUDA_GRAPHS=OFF"
    CMAKE_ARGS=-DLOCO_CUDA_GRAPHS=OFF BUILD_ARGS="$targets" "$ROOT/scripts/build_gpu.sh" "$CARRY" "$BUILD" \
      >"$OUT/build-without-graphs.log" 2>&1 || { tail -30 "$OUT/build-without-graphs.log"; exit 1; }
  fi
  stamp "built; tests that need a GPU"
  timeout 240 "$BUILD/tests/loco_torch_tests" --gtest_filter='CudaStep.*:AdamWParity.*:HeadLoss*:StackedRows*:Rotary*:Swiglu*' \
    >"$OUT/gpu-tests.log" 2>&1
  echo "tests exit status $?"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|actual|error" "$OUT/gpu-tests.log" | head -40

  stamp "DiLoCo, 2 replicas as threads, small-5m, bf16: graphs on and off"
  for graphs in true false; do
    timeout 150 "$BUILD/loco" train --config "$ROOT/configs/small-5m.toml" --set "data.dir=$DATA" \
      --set train.device=cuda --set train.autocast=bf16 --set train.steps=24 --set train.tokens=0 \
      --set train.log_every=1 --set train.eval_every=0 --set dist.algorithm=diloco --set dist.replicas=2 \
      --set diloco.sync_every=6 --set train.micro_batch_size=4 --set "train.cuda_graphs=$graphs" --set "train.out_dir=/tmp/diloco-$graphs" \
      >"$OUT/diloco-$graphs.log" 2>&1
    echo "graphs=$graphs exit status $?"
  done
  python3 - /tmp/diloco-true/metrics.jsonl /tmp/diloco-false/metrics.jsonl <<'PYEOF'
import json, sys
try:
    a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
    worst = max(abs(x["loss"] - y["loss"]) / y["loss"] for x, y in zip(a, b))
    print(f"DiLoCo: {len(a)} and {len(b)} steps; worst relative loss difference {worst:.2e}; "
          f"captured at the end: {a[-1].get('cuda_graphs')}; final losses {a[-1]['loss']:.6f} / {b[-1]['loss']:.6f}; "
          f"tokens/s {a[-1]['tokens_per_s']:.0f} / {b[-1]['tokens_per_s']:.0f}")
except Exception as e:
    print(f"DiLoCo comparison failed: {e!r}")
PYEOF
  stamp "throughput at 125M"
  LOCO_VARIANTS="graphs:train.cuda_graphs=true" TORCH_STEPS=12 \
    "$ROOT/bench/gpu_throughput.sh" "$BUILD" "$DATA" "$OUT/125m" 2>&1 | tee "$OUT/throughput-125m.txt"
fi
if [[ $PART == 350m ]] || { [[ $PART == all ]] && ((SECONDS - start <= BUDGET_S - 220)); }; then
  stamp "throughput at 350M"
  CONFIG=$ROOT/configs/llama-350m.toml PROFILE=0 MICRO=0 LOCO_STEPS=20 TORCH_STEPS=8 \
    LOCO_VARIANTS="graphs:train.cuda_graphs=true" \
    "$ROOT/bench/gpu_throughput.sh" "$BUILD" "$DATA" "$OUT/350m" 2>&1 | tee "$OUT/throughput-350m.txt"
elif [[ $PART == all ]]; then
  stamp "no time left for 350M (BUDGET_S=$BUDGET_S)"
fi
stamp "done"
