#!/usr/bin/env bash
# How long survivors take to go on when a member of their quorum dies or stops inside a collective
# (docs/fault-tolerance.md "Groups per quorum"). Starts `loco coordinator` and three test members
# (build/tests/loco_elastic_worker) that all-reduce a 1 per round; member c is killed (die) or stopped
# (stop) in round ROUND after its quorum formed. Prints one JSON line per repeat: when a's last round
# before the fault completed, when a gave the collective up, when the round completed in the new group.
# Usage: bench/elastic_recovery.sh die|stop [ROUND] [REPEATS] [BUILD_DIR]
set -euo pipefail
fault=${1:?die or stop}
round=${2:-5}
repeats=${3:-3}
build=${4:-build}
case "$fault" in die | stop) ;; *) echo "elastic_recovery: the fault is die or stop" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
worker=$build/tests/loco_elastic_worker
[ -x "$worker" ] || { echo "elastic_recovery: build $worker first (scripts/test.sh builds it)" >&2; exit 2; }
work=$(mktemp -d)
export LOCO_RUN_SECRET=elastic-recovery-benchmark-secret  # the coordinator's and the members' (docs/security.md)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
for ((r = 1; r <= repeats; r++)); do
  "$build/loco" coordinator --host 127.0.0.1 --port 0 --run-id bench --min-replicas 2 --start-replicas 3 \
    --heartbeat-timeout-s 1 --join-window-s 0.5 > "$work/coordinator.log" 2>&1 &
  coordinator=$!
  for _ in $(seq 100); do grep -q 'on 127.0.0.1:' "$work/coordinator.log" && break; sleep 0.1; done
  address=$(grep -o '127.0.0.1:[0-9]*' "$work/coordinator.log" | head -1)
  common=(--coordinator "$address" --run-id bench --rounds 12)
  "$worker" "${common[@]}" --name a > "$work/a.log" 2>&1 & a=$!
  "$worker" "${common[@]}" --name b > "$work/b.log" 2>&1 & b=$!
  "$worker" "${common[@]}" --name c "--$fault-at" "$round" > "$work/c.log" 2>&1 & c=$!
  wait "$a" "$b"
  kill -9 "$c" 2>/dev/null || true
  wait "$c" 2>/dev/null || true
  kill "$coordinator"; wait "$coordinator" 2>/dev/null || true
  before=$(grep -E "^round $((round - 1)) quorum" "$work/a.log" | grep -oE 'at [0-9.]+' | cut -d' ' -f2)
  abandoned=$(grep -E "^round $round attempt 1 abandoned" "$work/a.log" | grep -oE 'at [0-9.]+' | cut -d' ' -f2 || true)
  after=$(grep -E "^round $round quorum" "$work/a.log" | grep -oE 'at [0-9.]+' | cut -d' ' -f2)
  echo "{\"fault\": \"$fault\", \"round\": $round, \"machine\": \"$(nproc) cores\", \"last_round_before_s\": $before," \
       "\"abandoned_s\": ${abandoned:-null}, \"round_completed_s\": $after," \
       "\"recovery_s\": $(python3 -c "print(round($after - $before, 3))")}"
done
