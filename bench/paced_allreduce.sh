#!/usr/bin/env bash
# `loco bench allreduce` over real rate-limited links (scripts/netns_run.sh: network namespaces, tc
# tbf both ways per rank) for several rank counts and rates, with the pacing of comm.round_kib (issue
# 16: every codec within 1.1x of the ring bound). Prints one markdown row per (rate, ranks, size,
# codec): time/bound, and where the time went (reduce-scatter and all-gather phases, codec work, rounds).
# Needs root. See bench/README.md and docs/results.md, "Pacing".
#
#   bench/paced_allreduce.sh [--round-kib auto|off|K] [--ranks "2 4 8"] [--rates "10 100"]
#                            [--sizes-10 4MB,16MB] [--sizes-100 4MB,16MB,64MB] [--codec fp32,bf16,int8,fp4]
#                            [--repeats 3] [--latency-ms L --delay latency] [--measured] [--burst BYTES]
#
# --latency-ms adds an emulated one-way latency (tbf gives none; netem is missing here), charged in
# real time with --delay latency (rounds x latency per operation) and counted in the bound.
# --measured leaves the rate out of loco's options, so that auto sizes rounds from the link the
# exchanges measure (note "measured-link"; the warm-up exchange is the first sample); the bound is then
# computed here from the bytes sent, 8 * wire_bytes / rate + N * latency, and the row shows the fit.
# --burst sets the tbf bucket of every link (netns_run.sh's default: 4 ms at the rate, at least 8 KiB).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCO=$ROOT/build/loco
ROUND_KIB=auto
RANKS="2 4 8"
RATES="10 100"
SIZES_10=4MB,16MB
SIZES_100=4MB,16MB,64MB
CODECS=fp32,bf16,int8,fp4
REPEATS=3
EXTRA=()
LATENCY_MS=0
MEASURED=0
SHAPE=()
while (($#)); do
  case $1 in
    --round-kib) ROUND_KIB=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --sizes-10) SIZES_10=$2; shift 2 ;;
    --sizes-100) SIZES_100=$2; shift 2 ;;
    --codec) CODECS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --latency-ms) LATENCY_MS=$2; EXTRA+=("$1" "$2"); shift 2 ;;
    --delay) EXTRA+=("$1" "$2"); shift 2 ;;
    --measured) MEASURED=1; shift ;;
    --burst) SHAPE+=(--burst "$2"); shift 2 ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) echo "paced_allreduce.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
[[ -x $LOCO ]] || { echo "paced_allreduce.sh: no loco binary at $LOCO (run scripts/setup.sh first)" >&2; exit 2; }

echo "# $(date -u +%F) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), round_kib=$ROUND_KIB ${EXTRA[*]} ${SHAPE[*]}$( ((MEASURED)) && echo ' measured link')"
echo "| Mbit/s | ranks | size | codec | path | round KiB | rounds | time s | bound s | time/bound | reduce-scatter s | all-gather s | codec work s | measured Mbit/s, ms |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for rate in $RATES; do
  sizes=$SIZES_100
  ((rate >= 100)) || sizes=$SIZES_10
  link=(--bandwidth-mbps "$rate")
  ((MEASURED)) && link=()
  for ranks in $RANKS; do
    "$ROOT/scripts/netns_run.sh" --nproc "$ranks" --rate "${rate}mbit" "${SHAPE[@]}" -- "$LOCO" bench allreduce --backend gloo \
      --sizes "$sizes" --codec "$CODECS" "${link[@]}" --repeats "$REPEATS" --round-kib "$ROUND_KIB" \
      "${EXTRA[@]}" 2>&1 | sed -n 's/^\[rank 0\] {/{/p' | python3 -c '
import json, sys
rate, latency_ms = float(sys.argv[1]), float(sys.argv[2])
for line in sys.stdin:
    r = json.loads(line)
    paced = r["path"] == "pieces"
    def cell(key, fmt):
        return fmt % r[key] if paced else "–"
    bound = r["bound_s"]
    if bound is None:  # --measured: from the bytes this rank sent
        bound = 8 * r["wire_bytes"] / (rate * 1e6) + r["nproc"] * latency_ms / 1e3
    measured = "%.1f, %.1f" % (r["measured_mbps"], r["measured_latency_ms"]) if "measured_mbps" in r else "–"
    print("| %g | %d | %g MB | %s | %s | %s | %s | %.3f | %.3f | **%.2f** | %s | %s | %s | %s |" % (
        rate, r["nproc"], r["size_bytes"] / 1e6, r["codec"], r["path"], cell("round_kib", "%.1f"),
        cell("rounds", "%d"), r["time_s"], bound, r["time_s"] / bound, cell("reduce_scatter_s", "%.3f"),
        cell("all_gather_s", "%.3f"), cell("compute_s", "%.3f"), measured), flush=True)
    assert r.get("verified", True), "a result outside its error bound"
' "$rate" "$LATENCY_MS"
  done
done
