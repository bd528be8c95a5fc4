#!/usr/bin/env bash
# End-to-end utilisation of training over real rate-limited links (issue 16): the small-5m preset
# (bench/configs/small-5m.toml, BPE Brown) trained by N Gloo ranks, each in its own network namespace
# behind a tc tbf link of R Mbit/s both ways (scripts/netns_run.sh), against the same per-rank work
# without communication: N single-replica processes side by side on the same cores (one process alone
# is ~1.6x faster than two together on this 2-core VM, so a single process is no fair baseline).
#
#   utilisation = (baseline seconds for steps (a, b]) / (run's seconds for steps (a, b])
#
# from the per-step elapsed_s of metrics.jsonl (rank 0 of the run; the mean of the baseline processes).
# The window leaves out start-up (a = 5) and the run's last step, where every strategy synchronises
# once more whatever its schedule; DiLoCo with H = 100 runs 101 steps so that its synchronisation at
# step 100 is inside the window. Every rank trains on its own batch of 8 sequences (dist.batch =
# per_replica), one intra-op thread; comm.bandwidth_mbps = R so that comm.round_kib = auto paces the
# exchanges; evaluation only at the end (its loss is printed, not timed). Needs root, unless --emulate:
# then the ranks run under `loco launch` on loopback with comm.delay = full, each exchange lasting at
# least its time on the emulated link (docs/comm.md), for machines where network namespaces or tbf
# are missing.
#
#   bench/utilisation.sh [--ranks "2 4"] [--rates "10 100"] [--runs "NAME ..."] [--out DIR] [--data DIR]
#                        [--loco PATH] [--emulate] [--repeats K]
#
# --repeats K measures every (ranks, rate) group K times, each time its baseline and then its runs, so that
# the VM's drift falls on baseline and run alike; rows are named "RUN #k", and a last table gives each
# run's median utilisation and range (bench/utilisation_report.py --medians).
#
# Runs (NAME): ddp, diloco-fp4-h100, diloco-fp4-h20, overlapped-fp4-h20-auto, streaming-fp4-h20-tau1,
# streaming-fp4-h20-auto, sparseloco-h20 (see RUNS below). Prints one markdown row per (ranks, rate, run) and leaves the
# run directories under --out (default runs/utilisation-<date>).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCO=$ROOT/build/loco
RANKS="2 4"
RATES="10 100"
SELECTED=""
OUT=$ROOT/runs/utilisation-$(date -u +%Y%m%d-%H%M%S)
DATA=$ROOT/data/brown
EMULATE=0
REPEATS=1
while (($#)); do
  case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --runs) SELECTED=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --loco) LOCO=$2; shift 2 ;;
    --emulate) EMULATE=1; shift ;;
    --repeats) REPEATS=$2; shift 2 ;;
    -h|--help) sed -n 2,28p "$0"; exit 0 ;;
    *) echo "utilisation.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
[[ -x $LOCO ]] || { echo "utilisation.sh: no loco binary at $LOCO (run scripts/setup.sh first)" >&2; exit 2; }
[[ -f $DATA/meta.json ]] || { echo "utilisation.sh: no prepared data at $DATA (run scripts/quickstart.sh first)" >&2; exit 2; }

# NAME|steps|settings. DDP sends the whole fp32 gradient every step (16 s a step at 10 Mbit/s), so it
# runs 8 steps, timed over (3, 7].
declare -A RUNS=(
  [ddp]="8|dist.algorithm=ddp"
  [diloco-fp4-h100]="101|dist.algorithm=diloco diloco.sync_every=100 comm.codec=fp4"
  [diloco-fp4-h20]="61|dist.algorithm=diloco diloco.sync_every=20 comm.codec=fp4"
  [overlapped-fp4-h20-auto]="61|dist.algorithm=streaming streaming.fragments=1 streaming.sync_every=20 streaming.codec=fp4 streaming.overlap_auto=true"
  [streaming-fp4-h20-tau1]="61|dist.algorithm=streaming streaming.fragments=2 streaming.sync_every=20 streaming.codec=fp4 streaming.overlap=1"
  [streaming-fp4-h20-auto]="61|dist.algorithm=streaming streaming.fragments=2 streaming.sync_every=20 streaming.codec=fp4 streaming.overlap_auto=true"
  [sparseloco-h20]="61|dist.algorithm=sparseloco sparseloco.sync_every=20"
)
ORDER="ddp diloco-fp4-h100 diloco-fp4-h20 overlapped-fp4-h20-auto streaming-fp4-h20-tau1 streaming-fp4-h20-auto sparseloco-h20"
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "utilisation.sh: --repeats needs a positive whole number, not '$REPEATS'" >&2; exit 64; }
[[ -n $SELECTED ]] || SELECTED=$ORDER
for name in $SELECTED; do
  [[ -n ${RUNS[$name]-} ]] || { echo "utilisation.sh: unknown run '$name' (one of: $ORDER)" >&2; exit 64; }
done

mkdir -p "$OUT"
# One thread per process for the matmuls too: OpenBLAS (Debian's pthread build) keeps a pool of one
# thread per core that train.threads does not reach in a process alone on its machine, which is what the
# baseline's processes look like to loco (ranks sharing a machine size it themselves, note "blas-pool"),
# so N baseline processes would run N pools on the same cores: 2 processes of small-5m stepped in
# 1.20-1.46 s with a pool each and 1.00-1.04 s with one thread (results.md, "End-to-end utilisation").
export OPENBLAS_NUM_THREADS=1
common=(--config "$ROOT/bench/configs/small-5m.toml" --set "data.dir=$DATA" --set train.threads=1
        --set train.log_every=1 --set train.eval_every=0 --set train.checkpoint_every=0 --set dist.batch=per_replica)
sets_of() { local s; for s in $1; do printf -- '--set\n%s\n' "$s"; done; }

if ((EMULATE)); then
  link="emulated link (loopback, comm.delay=full)"
  ranks_over() { local n=$1 rate=$2; shift 2; "$LOCO" launch --nproc "$n" -- "$@" --set comm.delay=full; }
else
  link="tbf links"
  ranks_over() { local n=$1 rate=$2; shift 2; "$ROOT/scripts/netns_run.sh" --nproc "$n" --rate "${rate}mbit" -- "$LOCO" "$@"; }
fi
echo "# $(date -u +%F) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), loco $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $link"
echo "| ranks | Mbit/s | run | window | run s | baseline s | utilisation | sent MB/rank | eval loss | tau | exchange s | waited s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
rows=$OUT/rows.md
: >"$rows"
for ranks in $RANKS; do
  for rate in $RATES; do
    for ((rep = 1; rep <= REPEATS; rep++)); do
      tag=n$ranks-r$rate
      label=""
      if ((REPEATS > 1)); then tag+=-k$rep; label=" #$rep"; fi
      # The baseline: N processes at once, the same per-rank work, no group; again for every rate and
      # repeat, since this VM's speed drifts by several percent over tens of minutes.
      base=$OUT/baseline-$tag
      pids=()
      for ((r = 0; r < ranks; r++)); do
        "$LOCO" train "${common[@]}" --set train.steps=101 --set "train.seed=$r" --set "train.out_dir=$base/p$r" \
          >"$base-p$r.log" 2>&1 &
        pids+=($!)
      done
      for pid in "${pids[@]}"; do
        wait "$pid" || { echo "utilisation.sh: a baseline process failed (see $base-p*.log)" >&2; exit 1; }
      done
      for name in $SELECTED; do
        IFS='|' read -r steps settings <<<"${RUNS[$name]}"
        dir=$OUT/$name-$tag
        mapfile -t extra < <(sets_of "$settings")
        ranks_over "$ranks" "$rate" train "${common[@]}" "${extra[@]}" \
          --set dist.backend=gloo --set "train.steps=$steps" --set "comm.bandwidth_mbps=$rate" \
          --set "train.out_dir=$dir" >"$dir.log" 2>&1 || { echo "utilisation.sh: $name failed (see $dir.log)" >&2; exit 1; }
        python3 "$ROOT/bench/utilisation_report.py" --run "$dir" --log "$dir.log" --baseline "$base" --steps "$steps" \
          --ranks "$ranks" --rate "$rate" --name "$name$label" | tee -a "$rows"
      done
    done
  done
done
if ((REPEATS > 1)); then
  echo
  python3 "$ROOT/bench/utilisation_report.py" --medians "$rows"
fi
