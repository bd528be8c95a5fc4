#!/usr/bin/env bash
# Training throughput on one GPU: `loco train` against the plain PyTorch loop bench/torch_loop.py,
# eager and under torch.compile, on the same model, batch and data with bf16 autocast, in one run.
# Prints tokens/s, MFU and loco's ratio to each peer; with PROFILE=1 also a kernel-time comparison of
# two steps of each (bench/trace_summary.py). Then micro-benchmarks on the GPU: the head's loss, the
# stacked projections, DiLoCo's outer step at 125M and 350M. See bench/README.md and docs/results.md ("GPU").
#
#   bench/gpu_throughput.sh [BUILD_DIR] [DATA_DIR] [OUT_DIR]
#       defaults: build-cuda, data/brown, a temporary folder (OUT_DIR keeps results, logs and traces)
#
# Environment: CONFIG (configs/llama-125m.toml), LOCO_STEPS (30: rate over steps 6-25), TORCH_STEPS
# (20 timed after 3 warm-up), THREADS (nproc), PEAK_TFLOPS (989.4: H100 SXM dense bf16, datasheet),
# PROFILE (1), COMPILE (1), PYTHON (python3, the one with torch), TIMEOUT_S (300 per run),
# HEAD_LOSS_ARGS and PROJECTIONS_ARGS (the shapes of the two micro-benchmarks, below), MICRO (1: run them
# and the outer-step benchmark; 0: skip), LOCO_VARIANTS (more loco runs in the same invocation, each
# LABEL:KEY=VALUE[,KEY=VALUE], e.g. "graphs:train.cuda_graphs=true"; not profiled, no eval check).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$(realpath -m "${1:-$ROOT/build-cuda}")
DATA_DIR=$(realpath -m "${2:-$ROOT/data/brown}")
OUT_DIR=$(realpath -m "${3:-$(mktemp -d)}")
CONFIG=$(realpath -m "${CONFIG:-$ROOT/configs/llama-125m.toml}")
LOCO_STEPS=${LOCO_STEPS:-30}
TORCH_STEPS=${TORCH_STEPS:-20}
THREADS=${THREADS:-$(nproc)}
PEAK_TFLOPS=${PEAK_TFLOPS:-989.4}
PROFILE=${PROFILE:-1}
COMPILE=${COMPILE:-1}
PY=${PYTHON:-python3}
TIMEOUT_S=${TIMEOUT_S:-300}
MICRO=${MICRO:-1}
LOCO_VARIANTS=${LOCO_VARIANTS:-}
die() { echo "gpu_throughput.sh: $*" >&2; exit 2; }
have_loco=1
[[ -x "$BUILD_DIR/loco" ]] || { echo "gpu_throughput.sh: no loco binary at $BUILD_DIR/loco (scripts/build_gpu.sh" \
  "first); measuring the PyTorch peers only" >&2; have_loco=0; }
[[ -f "$DATA_DIR/meta.json" ]] || die "no $DATA_DIR/meta.json (prepare data, or pass DATA_DIR)"
((LOCO_STEPS >= 15)) || die "LOCO_STEPS must be at least 15 (the rate spans logged steps 5..LOCO_STEPS-5)"
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1);" \
  "$(nproc) CPU cores; $($PY -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
echo "config: $CONFIG; data: $DATA_DIR; bf16 autocast; threads $THREADS"

# The practical bf16 matmul ceiling of this GPU, measured (8192^3, median of 10 after 3 warm-ups).
$PY - >"$WORK/peak.json" <<'PYEOF'
import json, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
for _ in range(3):
    a @ b
times = []
for _ in range(10):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); a @ b; end.record(); end.synchronize()
    times.append(start.elapsed_time(end) / 1e3)
times.sort()
print(json.dumps({"matmul_bf16_tflops": 2 * 8192**3 / times[len(times) // 2] / 1e12}))
PYEOF

common=(--set train.tokens=0 --set train.eval_every=0 --set train.device=cuda --set train.autocast=bf16)

run_loco() {  # label, extra --set arguments...
local label=$1; shift
echo "== loco train ($label): $LOCO_STEPS steps" >&2
profile_env=()
((PROFILE)) && [[ $label == loco ]] &&
  profile_env=(LOCO_PROFILE="$WORK/loco-trace.json" LOCO_PROFILE_START=$((LOCO_STEPS - 1)) LOCO_PROFILE_STEPS=2)
env "${profile_env[@]}" timeout "$TIMEOUT_S" "$BUILD_DIR/loco" train --config "$CONFIG" "${common[@]}" \
  --set "data.dir=$DATA_DIR" --set "train.steps=$LOCO_STEPS" --set "train.out_dir=$WORK/$label-run" \
  --set "train.threads=$THREADS" --set train.log_every=5 --set train.checkpoint_every=0 "$@" \
  >"$WORK/$label.log" 2>&1
status=$?
tail -n 5 "$WORK/$label.log" | tr '\r' '\n' | tail -n 5 >&2
cp "$WORK/$label-run/metrics.jsonl" "$OUT_DIR/$label-metrics.jsonl" 2>/dev/null
((status == 0)) || echo "gpu_throughput.sh: loco train ($label) failed (status $status)" >&2
[[ $label == loco ]] || { rm -rf "$WORK/$label-run/checkpoints"; return; }

# The CUDA forward against the CPU one on the trained checkpoint (float32, no autocast).
checkpoint=$WORK/loco-run/checkpoints/step_$LOCO_STEPS
if [[ -d "$checkpoint" ]]; then
  for device in cuda cpu; do
    timeout 120 "$BUILD_DIR/loco" eval --checkpoint "$checkpoint" --data "$DATA_DIR" --batches 2 --batch-size 4 \
      --device "$device" >"$WORK/eval-$device.json" 2>"$WORK/eval-$device.err" || tail -3 "$WORK/eval-$device.err" >&2
  done
fi
rm -rf "$WORK/loco-run/checkpoints"
}
loco_labels=()
if ((have_loco)); then
  run_loco loco
  loco_labels+=(loco)
  for variant in $LOCO_VARIANTS; do
    sets=()
    IFS=, read -ra pairs <<<"${variant#*:}"
    for pair in "${pairs[@]}"; do sets+=(--set "$pair"); done
    run_loco "${variant%%:*}" "${sets[@]}"
    loco_labels+=("${variant%%:*}")
  done
fi

run_torch() {  # label, extra args...
  local label=$1; shift
  echo "== torch_loop.py $label: 3 + $TORCH_STEPS steps" >&2
  local prof=()
  ((PROFILE)) && prof=(--profile "$WORK/$label-trace.json")
  timeout "$TIMEOUT_S" $PY "$ROOT/bench/torch_loop.py" --config "$CONFIG" --data "$DATA_DIR" --steps "$TORCH_STEPS" \
    --threads "$THREADS" --device cuda --autocast bf16 --set train.tokens=0 "${prof[@]}" "$@" \
    >"$WORK/$label.json" 2>"$WORK/$label.err" || { echo "gpu_throughput.sh: torch_loop $label failed" >&2; tail -n 15 "$WORK/$label.err" >&2; }
}
run_torch eager
((COMPILE)) && run_torch compile --compile

$PY - "$WORK" "$OUT_DIR" "$PEAK_TFLOPS" "$LOCO_STEPS" "${loco_labels[@]}" <<'PYEOF'
import json, os, sys

work, out, peak_tflops, loco_steps = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
loco_labels = sys.argv[5:]

def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

peers = {label: load(f"{work}/{label}.json") for label in ("eager", "compile")}
shape = next((p for p in peers.values() if p), None)
results = {"peak_tflops_datasheet": peak_tflops, **(load(f"{work}/peak.json") or {})}
runs = {}
for label in loco_labels:
    try:
        rows = [json.loads(l) for l in open(f"{work}/{label}-run/metrics.jsonl") if l.strip()]
        # Steps 6..(LOCO_STEPS-5): start-up and the first 5 steps out, the profiled last steps out.
        rows = [r for r in rows if r["step"] <= loco_steps - 5]
        first, last = rows[0], rows[-1]
        runs[label] = {"tokens_per_s": (last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"]),
                       "loss": last["loss"], "steps_timed": last["step"] - first["step"],
                       "cuda_graphs": last.get("cuda_graphs")}
    except (OSError, ValueError, IndexError, KeyError, ZeroDivisionError) as e:
        print(f"no {label} rate: {e!r}")
for label, p in peers.items():
    if p:
        runs[f"pytorch {label}"] = {"tokens_per_s": p["tokens_per_s"], "loss": p["final_loss"],
                                    "steps_timed": p["steps"], "warmup_s": p["warmup_s"],
                                    "attention": p["attention"], "torch": p["torch"]}
if shape:
    n = shape["params"]
    attention = 12 * shape["num_hidden_layers"] * shape["seq_len"] * shape["hidden_size"]
    results.update(params=n, flops_per_token_6n=6 * n, flops_per_token_with_attention=6 * n + attention,
                   batch_size=shape["batch_size"], micro_batch_size=shape["micro_batch_size"],
                   seq_len=shape["seq_len"])
evals = {d: load(f"{work}/eval-{d}.json") for d in ("cuda", "cpu")}
if all(evals.values()):
    results["eval_loss_cuda"], results["eval_loss_cpu"] = evals["cuda"]["loss"], evals["cpu"]["loss"]
    print(f"loco eval of the trained checkpoint, float32: CUDA loss {evals['cuda']['loss']:.6f}, "
          f"CPU loss {evals['cpu']['loss']:.6f}, relative difference "
          f"{abs(evals['cuda']['loss'] - evals['cpu']['loss']) / evals['cpu']['loss']:.1e}")
print(f"MFU = tokens/s x 6N / {peak_tflops} TFLOP/s (bf16 dense peak, datasheet); "
      f"measured bf16 matmul: {results.get('matmul_bf16_tflops', float('nan')):.0f} TFLOP/s")
if shape:
    print(f"N = {results['params']:,} parameters; batch {results['batch_size']} x {results['seq_len']} tokens "
          f"(micro-batch {results['micro_batch_size']}); 6N+attention = 6N + 12*layers*seq*hidden")
header = ("run", "tokens/s", "MFU (6N)", "MFU (6N+attn)", "loco / this", "loss")
table = [header]
loco_rate = runs.get("loco", {}).get("tokens_per_s")
for label, r in runs.items():
    tps = r["tokens_per_s"]
    r["mfu_6n"] = tps * results.get("flops_per_token_6n", float("nan")) / (peak_tflops * 1e12)
    r["mfu_with_attention"] = tps * results.get("flops_per_token_with_attention", float("nan")) / (peak_tflops * 1e12)
    ratio = f"{loco_rate / tps:.3f}" if loco_rate else "-"
    table.append((label, f"{tps:,.0f}", f"{100 * r['mfu_6n']:.1f}%", f"{100 * r['mfu_with_attention']:.1f}%",
                  ratio, f"{r['loss']:.4f}"))
results["runs"] = runs
widths = [max(len(row[i]) for row in table) for i in range(len(header))]
for i, row in enumerate(table):
    print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
    if i == 0:
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
with open(f"{out}/results.json", "w") as f:
    json.dump(results, f, indent=1)
PYEOF

# The head's loss alone, plain against chunked (src/loco/model/head_loss.h), at one micro-batch of the
# default config (32 x 1024 tokens, hidden 768, vocab 32000; HEAD_LOSS_ARGS for another).
if ((MICRO)) && [[ -x "$BUILD_DIR/loco_head_loss_bench" ]]; then
  echo "== head loss, forward and backward, bf16 autocast: plain vs chunked"
  # shellcheck disable=SC2086
  timeout "$TIMEOUT_S" "$BUILD_DIR/loco_head_loss_bench" --device cuda --bf16 \
    ${HEAD_LOSS_ARGS:---rows 32768 --hidden 768 --vocab 32000} | tee "$OUT_DIR/head-loss.jsonl"
fi
# Attention's q/k/v with rotary and the MLP's gate/up with SwiGLU, separate against stacked
# (src/loco/model/stacked_rows.h), at one micro-batch of the default config (PROJECTIONS_ARGS for another).
if ((MICRO)) && [[ -x "$BUILD_DIR/loco_projections_bench" ]]; then
  echo "== projections, forward and backward, bf16 autocast: separate vs stacked"
  # shellcheck disable=SC2086
  timeout "$TIMEOUT_S" "$BUILD_DIR/loco_projections_bench" --device cuda --bf16 \
    ${PROJECTIONS_ARGS:---batch 32 --seq 1024 --hidden 768 --heads 12 --kv-heads 12 --intermediate 2048} \
    | tee "$OUT_DIR/projections.jsonl"
fi
# DiLoCo's outer step on the GPU against a round of 30 training steps (issue 40: under 2% at 350M), a step
# being the preset's batch as micro-batches (125M: 8 x 32, 350M: 16 x 16 sequences of 1024).
if ((MICRO)) && [[ -x "$BUILD_DIR/loco_outer_step_bench" ]]; then
  echo "== DiLoCo outer step on cuda, H = 30"
  for shape in "llama-125m 32 8" "llama-350m 16 16"; do
    read -r preset micro count <<<"$shape"
    timeout "$TIMEOUT_S" "$BUILD_DIR/loco_outer_step_bench" "$ROOT/configs/$preset.toml" --device cuda \
      --batch "$micro" --micro-batches "$count" --seq 1024 --every 30 --repeats 5 | tee -a "$OUT_DIR/outer-step.jsonl"
  done
fi

if ((PROFILE)); then
  traces=()
  for label in loco eager compile; do
    [[ -s "$WORK/$label-trace.json" ]] && traces+=("$label=$WORK/$label-trace.json")
  done
  if ((${#traces[@]})); then
    $PY "$ROOT/bench/trace_summary.py" --steps 2 "${traces[@]}" \
      | tee "$OUT_DIR/trace-summary.txt"
    for t in "${traces[@]}"; do gzip -c "${t#*=}" >"$OUT_DIR/${t%%=*}-trace.json.gz"; done
  fi
fi
# The runs' own output (loco's progress lines, the peers' warnings), one file.
for label in "${loco_labels[@]}" eager compile; do
  [[ -f "$WORK/$label.log" || -f "$WORK/$label.err" ]] && echo "=== $label" && cat "$WORK/$label".{log,err} 2>/dev/null
done >"$OUT_DIR/runs.log"
true
