#!/usr/bin/env bash
# Issue 38, pipeline stages over real rate-limited links (scripts/netns_run.sh: a network namespace per rank,
# tc tbf both ways at RATE): tokens/s, the bubble and the activation bytes of R = 1 pipeline of S = 2 and 4
# stage processes (Gloo ranks) against the same model trained by one process in the same invocation, and
# the step time's bounds: one process's step over S (perfect split) stretched by the 1F1B bubble
# (S - 1)/(m + S - 1), and the busiest stage's activation bytes per step over the link.
# With REPLICAS=2 it trains 2 pipeline replicas (DiLoCo across them, every SYNC_EVERY steps) over links of
# RATE between a replica's stages and ACROSS Mbit/s between the replicas (netns_run.sh --across): the
# table then adds the exposed communication (the outer steps' seconds per step, comm_s) and its bytes.
# Needs root. docs/results.md, "Pipeline stages".
#
#   sudo bench/pipeline_links.sh [LOCO] [DATA_DIR]  # RATES="1000 100" STAGES="2 4" CODECS="fp32 bf16" SCHEDULE=1f1b
#   sudo REPLICAS=2 ACROSS=10 STEPS=45 SYNC_EVERY=20 CODECS=fp32 bench/pipeline_links.sh
#
# The model (hidden 256, 8 layers, 8 heads, 128 tokens, 16 sequences per step in micro-batches of 2: m = 8)
# has ~8M parameters with the Brown BPE vocabulary. Each rank computes with one thread; on a machine
# with fewer cores than ranks the stages share cores, which the "cores" line shows and the bound does not
# know about.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCO=$(realpath "${1:-$ROOT/build/loco}")
DATA=$(realpath "${2:-$ROOT/data/brown}")
RATES=${RATES:-"1000 100"}
STAGES=${STAGES:-"2 4"}
CODECS=${CODECS:-"fp32 bf16"}
SCHEDULE=${SCHEDULE:-1f1b}
STEPS=${STEPS:-30}
REPLICAS=${REPLICAS:-1}
ACROSS=${ACROSS:-10}
SYNC_EVERY=${SYNC_EVERY:-20}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '' > "$out/empty.toml"
micro=2
batch=16
common=(train --config "$out/empty.toml" --set data.dir="$DATA" --set model.hidden_size=256
        --set model.num_hidden_layers=8 --set model.num_attention_heads=8 --set data.seq_len=128
        --set train.batch_size="$batch" --set train.micro_batch_size="$micro" --set train.steps="$STEPS"
        --set train.eval_every=0 --set train.eval_batches=1 --set train.log_every=1 --set train.threads=1
        --set optim.warmup_steps=5 --set pipeline.schedule="$SCHEDULE")

# Seconds per step over steps 6..N (the median; with replicas the mean, which holds the outer steps), mean
# bubble, the activation bytes per step, and the seconds and bytes of the replicas' exchanges per step.
summary() {
  /usr/bin/python3 - "$1" "$REPLICAS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
times = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rows, rows[1:]) if b["step"] > 5]
step_s = statistics.median(times) if sys.argv[2] == "1" else statistics.mean(times)
bubble = statistics.mean(r.get("pipeline_bubble", 0) for r in rows if r["step"] > 5)
last = rows[-1]
per_step = last.get("activation_bytes", 0) / last["step"]
print(f"{step_s:.4f} {bubble:.3f} {per_step:.0f} {last.get('comm_s', 0) / last['step']:.4f} "
      f"{last.get('bytes_sent', 0) / last['step']:.0f}")
PY
}

echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); loco $LOCO"
"$LOCO" "${common[@]}" --set train.out_dir="$out/one" >"$out/one.log" 2>&1
read -r one_s _ _ _ _ <<<"$(REPLICAS=1 summary "$out/one")"
params=$(grep -o 'loco train: [0-9]* parameters' "$out/one.log" | grep -o '[0-9][0-9]*' | head -1)
tokens=$((batch * 128))
echo "model: $params parameters, $tokens tokens per step and replica, m = $((batch / micro)) micro-batches"
if ((REPLICAS > 1)); then
  echo "$REPLICAS pipeline replicas, DiLoCo every $SYNC_EVERY steps over ${ACROSS} Mbit/s between the replicas"
  printf '| run | link between stages | codec | s/step | tokens/s (all replicas) | x one process | bubble (stages) | activation MB/step (stage 0) | exposed outer-step s/step (stage 0) | outer-step MB/step sent (stage 0) |\n'
  printf '|---|---|---|---|---|---|---|---|---|---|\n'
  printf '| one process | - | - | %s | %.0f | 1.00 | - | - | - | - |\n' "$one_s" "$(echo "$tokens / $one_s" | bc -l)"
else
  printf '| run | link | codec | s/step | tokens/s | x one process | bubble (stages) | activation MB/step (stage 0) | bound: compute+bubble | bound: link |\n'
  printf '|---|---|---|---|---|---|---|---|---|---|\n'
  printf '| one process | - | - | %s | %.0f | 1.00 | - | - | - | - |\n' "$one_s" "$(echo "$tokens / $one_s" | bc -l)"
fi
for rate in $RATES; do
  for stages in $STAGES; do
    for codec in $CODECS; do
      run="r${REPLICAS}-s${stages}-${rate}-${codec}"
      links=(--nproc $((REPLICAS * stages)) --rate "${rate}mbit")
      replicas=(--set dist.replicas="$REPLICAS")
      if ((REPLICAS > 1)); then
        links+=(--across "${stages}:${ACROSS}mbit")
        replicas+=(--set dist.algorithm=diloco --set diloco.sync_every="$SYNC_EVERY" --set dist.batch=per_replica)
      fi
      "$ROOT/scripts/netns_run.sh" "${links[@]}" --master-port 29611 -- "$LOCO" \
        "${common[@]}" --set dist.backend=gloo --set dist.stages="$stages" --set pipeline.codec="$codec" \
        "${replicas[@]}" --set train.out_dir="$out/$run" >"$out/$run.log" 2>&1 || { echo "$run failed:"; tail -5 "$out/$run.log"; continue; }
      dir0="$out/$run"
      read -r step_s _ bytes comm_s sent <<<"$(summary "$dir0")"
      bubbles=""
      for ((s = 0; s < stages; s++)); do
        dir="$dir0"; ((s > 0)) && dir="$dir/stage_$s"
        read -r _ b _ _ _ <<<"$(summary "$dir")"
        bubbles+="${b} "
      done
      m=$((batch / micro))
      if ((REPLICAS > 1)); then
        /usr/bin/python3 - "$stages" "$SCHEDULE" "$rate" "$codec" "$step_s" "$tokens" "$one_s" "$bubbles" "$bytes" "$comm_s" "$sent" "$REPLICAS" <<'PY'
import sys
stages, schedule, rate, codec, step_s, tokens, one_s, bubbles, stage_bytes, comm_s, sent, replicas = sys.argv[1:]
step_s, one_s, tokens, replicas = float(step_s), float(one_s), int(tokens), int(replicas)
print(f"| {replicas} x {stages} stages, {schedule} | {rate} Mbit/s | {codec} | {step_s:.3f} | {replicas * tokens / step_s:.0f} "
      f"| {replicas * one_s / step_s:.2f} | {bubbles.strip()} | {float(stage_bytes) / 1e6:.2f} | {float(comm_s):.3f} "
      f"| {float(sent) / 1e6:.2f} |")
PY
        continue
      fi
      /usr/bin/python3 - "$run" "$rate" "$codec" "$step_s" "$tokens" "$one_s" "$bubbles" "$bytes" "$stages" "$m" "$SCHEDULE" <<'PY'
import sys
run, rate, codec, step_s, tokens, one_s, bubbles, stage_bytes, stages, m, schedule = sys.argv[1:]
step_s, one_s, stage_bytes, stages, m = float(step_s), float(one_s), float(stage_bytes), int(stages), int(m)
compute_bound = one_s / stages * (m + stages - 1) / m      # perfect split, stretched by the bubble
# The busiest link carries a middle stage's activations one way and gradients the other way, each
# stage_bytes a step (stage 0's count: it sends activations only).
link_bound = stage_bytes * 8 / (float(rate) * 1e6)
print(f"| {stages} stages, {schedule} | {rate} Mbit/s | {codec} | {step_s:.3f} | {int(tokens) / step_s:.0f} | {one_s / step_s:.2f} "
      f"| {bubbles.strip()} | {stage_bytes / 1e6:.2f} | {compute_bound:.3f} | {link_bound:.3f} |")
PY
    done
  done
done
