#!/usr/bin/env bash
# Elastic DiLoCo under seeded faults: kill -9, SIGSTOP/SIGCONT of ranks and a coordinator restart, against
# the same run without faults (bench/chaos.py says what it measures; docs/fault-tolerance.md "Chaos runs").
# Usage: bench/chaos.sh [--faults N] [--mean-s S] [--seeds A-B] [--steps T] [--ranks R] [--kinds kill,stop,coordinator]
#                       [--stop-s S] [--limit-s S] [--keep DIR]        (bench/chaos.sh --help for all)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "${LOCO:-build/loco}" ] || { echo "chaos: build loco first (scripts/setup.sh)" >&2; exit 2; }
exec python3 bench/chaos.py "$@"
