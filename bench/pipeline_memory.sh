#!/usr/bin/env bash
# Issue 38, "memory is the point": a model that cannot train in one process under a per-process memory cap
# trains when split into pipeline stages, each process under the same cap (docs/pipeline.md "Measured").
#
#   sudo bench/pipeline_memory.sh [LOCO] [DATA_DIR] [CAP_MIB]
#
# Runs `loco train` of a ~110M-parameter Llama (hidden 1024, 8 layers, the data's vocabulary) for a few
# steps, once as one process (dist.stages = 1) and once as 4 stage processes over Gloo (loco launch --nproc
# 4), every process in a cgroup (v1 memory controller) of its own whose limit is CAP_MIB (default 1200):
# past it the kernel kills the process. Prints, for each run, whether it finished, and each process's
# peak memory as the cgroup counted it (memory.max_usage_in_bytes: resident pages and page cache), with
# the parameters, gradients and AdamW moments each holds (16 bytes a parameter) from the run's log.
# Needs root (cgroups); removes the cgroups it made, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
loco=$(realpath "${1:-build/loco}")
data=$(realpath "${2:-data/brown}")
cap_mib=${3:-1200}
steps=${STEPS:-3}
memory_root=/sys/fs/cgroup/memory
[[ -w $memory_root ]] || { echo "pipeline_memory: needs root and the cgroup v1 memory controller at $memory_root" >&2; exit 2; }
out=$(mktemp -d)
prefix="loco-pipeline-memory-$$"
cleanup() {
  for group in "$memory_root/$prefix"-*; do
    if [[ -d $group ]]; then rmdir "$group" 2>/dev/null || true; fi
  done
  rm -rf "$out"
}
trap cleanup EXIT

# Each rank moves itself into its own capped cgroup, then becomes loco train.
cat > "$out/capped.sh" <<SH
#!/usr/bin/env bash
group="$memory_root/$prefix-\$1-\${RANK:-0}"
mkdir -p "\$group"
echo $((cap_mib * 1024 * 1024)) > "\$group/memory.limit_in_bytes"
echo 0 > "\$group/memory.swappiness" 2>/dev/null || true
echo \$\$ > "\$group/cgroup.procs"
shift
exec "$loco" "\$@"
SH
chmod +x "$out/capped.sh"
printf '' > "$out/empty.toml"
common=(train --config "$out/empty.toml" --set data.dir="$data" --set model.hidden_size=1024
        --set model.num_hidden_layers=8 --set model.num_attention_heads=16 --set data.seq_len=128
        --set train.batch_size=4 --set train.micro_batch_size=1 --set train.steps="$steps"
        --set train.eval_every=0 --set train.eval_batches=1 --set train.log_every=1 --set train.threads=1
        --set optim.warmup_steps=1)

peak_mib() { echo $(( $(cat "$memory_root/$prefix-$1-$2/memory.max_usage_in_bytes") / 1024 / 1024 )); }

echo "machine: $(nproc) cores, $(( $(grep MemTotal /proc/meminfo | awk '{print $2}') / 1024 )) MiB; cap ${cap_mib} MiB per process"
set +e
"$out/capped.sh" one "${common[@]}" --set train.out_dir="$out/one" >"$out/one.log" 2>&1
one_rc=$?
"$loco" launch --nproc 4 --master-port 0 -- "$out/capped.sh" four "${common[@]}" --set dist.backend=gloo \
  --set dist.stages=4 --set train.out_dir="$out/four" >"$out/four.log" 2>&1
four_rc=$?
set -e
params=$(cat "$out/one.log" "$out/four.log" | grep -o 'loco train: [0-9]* parameters' | grep -o '[0-9][0-9]*' | head -1)
echo "model: ${params:-?} parameters; weights, gradients and AdamW moments: $(( ${params:-0} * 16 / 1024 / 1024 )) MiB in one process"
outcome() {  # what an exit status means here
  case $1 in
    0) echo "trained $steps steps" ;;
    137) echo "killed by the kernel at the cap" ;;
    *) echo "failed, exit $1" ;;
  esac
}
echo "one process:  $(outcome "$one_rc"); peak $(peak_mib one 0) MiB"
echo "4 stages:     $(outcome "$four_rc"); peak per process (MiB): $(for r in 0 1 2 3; do printf '%s ' "$(peak_mib four $r)"; done)"
grep -o 'this process is stage [0-9] of 4: .*MiB with gradients and AdamW.s moments)' "$out/four.log" | sed 's/^/  /' || true
if ((four_rc != 0 && four_rc != 137)); then tail -20 "$out/four.log"; fi
