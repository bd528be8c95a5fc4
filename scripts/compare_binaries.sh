#!/usr/bin/env bash
# Checks that a change to loco is behaviour-preserving: trains the same short runs of every algorithm
# with two loco binaries (e.g. the build of main before the change and after it) and compares every
# metrics line and checkpoint. Timings, emulated clocks and the saved config are left out (the config is
# the same run's by construction; a newer binary may know more keys); byte counts and the pacing an exchange
# chose (round_kib, rounds_in_flight, link_*) too, because Streaming DiLoCo's exchanges may or may not have
# finished when a metrics line is written (the same binary differs there from run to run). Checkpoint
# tensors must be identical bytes.
# Usage: scripts/compare_binaries.sh OLD_LOCO NEW_LOCO [WORK_DIR]    (exit 0: identical)
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2")
work=${3:-$(mktemp -d)}
command -v jq >/dev/null || { echo "compare_binaries: needs jq (apt-get install jq)" >&2; exit 2; }
cd "$(dirname "$0")/.."
"$new" prepare --input docs --out "$work/data" --tokenizer byte --val-fraction 0.1 >/dev/null
cat > "$work/base.toml" <<TOML
[model]
hidden_size = 32
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
[data]
dir = "$work/data"
seq_len = 32
[optim]
lr = 3e-3
warmup_steps = 4
[train]
steps = 24
batch_size = 8
eval_every = 8
eval_batches = 2
log_every = 2
checkpoint_every = 12
threads = 1
TOML
cases=(
  "none|"
  "ddp|--set dist.algorithm=ddp --set dist.replicas=2 --set ddp.bucket_mb=0.01"
  "diloco|--set dist.algorithm=diloco --set dist.replicas=2 --set diloco.sync_every=5 --set comm.bandwidth_mbps=10"
  "diloco_fp4_weighted_drop|--set dist.algorithm=diloco --set dist.replicas=4 --set diloco.sync_every=4 --set comm.codec=fp4 --set diloco.weighted=true --set diloco.drop_rate=0.3"
  "localsgd_qsr|--set dist.algorithm=localsgd --set dist.replicas=2 --set localsgd.qsr_alpha=0.05"
  "streaming|--set dist.algorithm=streaming --set dist.replicas=2 --set streaming.sync_every=6 --set dist.check_sync=true"
  "noloco|--set dist.algorithm=noloco --set dist.replicas=3 --set dist.batch=per_replica --set noloco.sync_every=4 --set train.seed=7"
  "noloco_pairs|--set dist.algorithm=noloco --set dist.replicas=4 --set dist.batch=per_replica --set noloco.sync_every=3 --set comm.bandwidth_mbps=10"
  "diloco_int8_median|--set dist.algorithm=diloco --set dist.replicas=3 --set diloco.sync_every=4 --set comm.codec=int8 --set dist.aggregation=median --set dist.adversary=2@4:scale=-5 --set dist.batch=per_replica"
  "diloco_bf16_trimmed|--set dist.algorithm=diloco --set dist.replicas=3 --set diloco.sync_every=7 --set comm.codec=bf16 --set dist.aggregation=trimmed_mean --set dist.batch=per_replica --set dist.check_sync=true"
  "localsgd_int4|--set dist.algorithm=localsgd --set dist.replicas=2 --set localsgd.sync_every=5 --set comm.codec=int4"
  "streaming_overlapped_diloco|--set dist.algorithm=streaming --set dist.replicas=2 --set streaming.fragments=1 --set streaming.sync_every=5 --set streaming.overlap=3 --set streaming.mix=0.25 --set streaming.codec=fp32 --set comm.bandwidth_mbps=10"
  "streaming_embeddings_int8|--set dist.algorithm=streaming --set dist.replicas=3 --set dist.batch=per_replica --set streaming.sync_every=6 --set streaming.assignment=sequential --set streaming.embeddings_fragment=true --set streaming.overlap=0 --set streaming.codec=int8"
  "streaming_wide_tau|--set dist.algorithm=streaming --set dist.replicas=2 --set streaming.sync_every=8 --set streaming.overlap=5 --set streaming.codec=bf16 --set dist.aggregation=centered_clip"
)
metrics_fields='del(.tokens_per_s, .elapsed_s, .sim_wall_s, .comm_s, .bytes_sent, .bytes_recv, .round_kib,
                    .rounds_in_flight, .link_mbps, .link_ms)'
state_fields='del(.config, .elapsed_s, .files, .communication, .strategy.link_free_at,
                  .strategy.in_flight[]?.started_at, .strategy.in_flight[]?.emulated_s)'
status=0
for case in "${cases[@]}"; do
  name=${case%%|*}
  read -r -a args <<< "${case#*|}"
  for side in old new; do
    binary=$old; [ "$side" = new ] && binary=$new
    rm -rf "$work/$side-$name"
    if ! "$binary" train --config "$work/base.toml" --set train.out_dir="$work/$side-$name" "${args[@]}" \
        > "$work/$side-$name.log" 2>&1; then
      echo "$name: the $side binary failed (see $work/$side-$name.log)"; status=1; continue 2
    fi
  done
  differences=0
  while IFS= read -r file; do
    case "$file" in
      */metrics.jsonl) filter=$metrics_fields; compare=(diff) ;;
      */state.json) filter=$state_fields; compare=(diff) ;;
      *) filter=""; compare=(cmp -s) ;;
    esac
    if [ -n "$filter" ]; then
      "${compare[@]}" <(jq -c "$filter" "$work/old-$name/$file") <(jq -c "$filter" "$work/new-$name/$file") >/dev/null \
        || { echo "$name: $file differs"; differences=1; }
    else
      "${compare[@]}" "$work/old-$name/$file" "$work/new-$name/$file" || { echo "$name: $file differs"; differences=1; }
    fi
  done < <(cd "$work/old-$name" && find . \( -name metrics.jsonl -o -name state.json -o -name '*.safetensors' \) | sort)
  files=$(cd "$work/old-$name" && find . \( -name metrics.jsonl -o -name state.json -o -name '*.safetensors' \) | wc -l)
  [ "$differences" = 0 ] && echo "$name: identical ($files files; final loss $(tail -1 "$work/new-$name/metrics.jsonl" | jq .loss))"
  [ "$differences" = 0 ] || status=1
done
exit $status
