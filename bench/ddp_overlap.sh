#!/usr/bin/env bash
# DDP overlap benchmark (issue 5 "Performance"; docs/algorithm-reference.md §8: published 35-38% speedup when
# compute and communication are balanced).
#
#   bench/ddp_overlap.sh [LOCO] [DATA_DIR] [THREADS_PER_REPLICA]
#
# Two replicas (threads, LocalGroup) train a 6.3M-parameter Llama with DDP behind an emulated link
# that is waited out in real time (comm.delay = full: each bucket's all-reduce completes after the
# link model's time, in the background, so backward really runs meanwhile). The link's bandwidth is
# chosen so that one step's all-reduce takes as long as one step's compute, measured first without a
# link. Then the same run with ddp.overlap = true (buckets launched from autograd hooks) and false
# (all buckets after backward). Prints ms per step (median over steps 6..N) of each and the speedup.
# Buckets are scaled to the model (4 MiB, first 1 MiB) so that it has several, as PyTorch's 25 MiB
# buckets have for a 100M-parameter model.
set -euo pipefail
cd "$(dirname "$0")/.."
loco=${1:-build/loco}
data=${2:-data/brown}
threads=${3:-1}
steps=${STEPS:-30}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

common=(--set data.dir="$data" --set model.hidden_size=256 --set model.num_hidden_layers=8
        --set model.num_attention_heads=8 --set data.seq_len=128 --set train.batch_size=16
        --set train.steps="$steps" --set train.log_every=1 --set train.eval_every=0 --set train.eval_batches=1
        --set train.threads="$threads" --set dist.algorithm=ddp --set dist.replicas=2
        --set ddp.bucket_mb=4 --set ddp.first_bucket_mb=1)
printf '' > "$out/empty.toml"

step_ms() {  # median wall ms per step over steps 6..N of a run directory
  /usr/bin/python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
times = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rows, rows[1:]) if b["step"] > 5]
print(f"{1000 * statistics.median(times):.1f}")
PY
}

"$loco" train --config "$out/empty.toml" "${common[@]}" --set train.out_dir="$out/compute" >"$out/compute.log" 2>&1
compute_ms=$(step_ms "$out/compute")
params=$(grep -o 'loco train: [0-9]* parameters' "$out/compute.log" | grep -o '[0-9]*' | head -1)
# Ring all-reduce with M = 2 sends N·4 bytes per step; the link that carries it in compute_ms:
mbps=$(/usr/bin/python3 -c "print(round($params * 4 * 8 / 1e6 / ($compute_ms / 1000), 1))")
for overlap in true false; do
  "$loco" train --config "$out/empty.toml" "${common[@]}" --set train.out_dir="$out/overlap-$overlap" \
    --set ddp.overlap=$overlap --set comm.bandwidth_mbps="$mbps" --set comm.delay=full \
    >"$out/overlap-$overlap.log" 2>&1
done
on=$(step_ms "$out/overlap-true")
off=$(step_ms "$out/overlap-false")
buckets=$(grep -o '[0-9]* buckets' "$out/overlap-true.log" | head -1)
/usr/bin/python3 - <<PY
import json
print(json.dumps({"benchmark": "ddp overlap", "machine": open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip(),
  "parameters": $params, "replicas": 2, "threads_per_replica": $threads, "buckets": "$buckets",
  "compute_ms_per_step": $compute_ms, "link_mbps": $mbps,
  "step_ms_overlap": $on, "step_ms_no_overlap": $off, "speedup": round($off / $on, 3)}))
PY
