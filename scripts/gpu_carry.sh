#!/usr/bin/env bash
# Run on the Debian machine: gathers into one folder what a GPU machine with no network needs to build
# loco against the libtorch of its PyTorch wheel and to train on prepared data. Take that folder along
# (for the lent device machine: name it in `carry`) and run scripts/build_gpu.sh there. docs/build.md.
#
#   scripts/gpu_carry.sh [--out DIR] [--data DIR]... [--tree]
#
# DIR (default .gpu in the repository root; kept out of git through .git/info/exclude) receives:
#   debs/                  the Debian 12 packages, fetched with `apt-get download`; MANIFEST lists versions
#   deps/usr/...           CLI11, toml11, nlohmann-json, fmt, FlatBuffers (headers + CMake configs) and the Gloo headers,
#                          unpacked with `dpkg -x`; deps/usr/src/googletest: the googletest sources
#   headers/usr/...        the headers of zlib, zstd, liblzma, libbz2 and liblz4, each used only where the GPU machine
#                          lacks it (with the machine's own runtime library: scripts/build_gpu.sh)
#   data/NAME/             a copy of each prepared data directory given with --data (loco prepare output)
#   tree/                  with --tree: a snapshot of this checkout's sources (tracked and untracked files
#                          that git does not ignore), to build while the checkout itself is being edited
# Re-running replaces debs/, deps/, headers/ and tree/; the same Debian release gives the same files.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$ROOT/.gpu
data_dirs=()
tree=0
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --data) data_dirs+=("$2"); shift 2 ;;
    --tree) tree=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_carry.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
out=$(realpath -m "$out")

# Header-only or header-mostly packages the PyTorch wheel does not bring. fmt's shared library
# (libfmt9) comes along only so that fmt's CMake config finds the files it names; the GPU build
# uses fmt header-only (LOCO_FMT_HEADER_ONLY).
deps=(libcli11-dev libtoml11-dev nlohmann-json3-dev libfmt-dev libfmt9 libflatbuffers-dev libgloo-dev googletest)
# The compression libraries of checksums and corpora: only their headers are carried (their static
# libraries are not position-independent); the runtime libraries are on every Linux machine.
header_only=(zlib1g-dev libzstd-dev liblzma-dev libbz2-dev liblz4-dev)

# Keep the folder out of git when it lies inside this checkout.
case $out/ in
  "$ROOT"/*)
    rel=${out#"$ROOT"}
    if ! git -C "$ROOT" check-ignore -q "$out" 2>/dev/null; then
      echo "${rel}/" >>"$(git -C "$ROOT" rev-parse --git-path info/exclude)"
      echo "gpu_carry: added ${rel}/ to .git/info/exclude"
    fi
    ;;
esac

rm -rf "$out/debs" "$out/deps" "$out/zlib" "$out/headers" "$out/tree"
mkdir -p "$out/debs" "$out/deps" "$out/headers"
(cd "$out/debs" && apt-get download "${deps[@]}" "${header_only[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
for p in "${deps[@]}" "${header_only[@]}"; do
  ls "$out/debs/${p}"_*.deb >/dev/null 2>&1 || { echo "gpu_carry: apt-get download $p failed (run apt-get update?)" >&2; exit 1; }
done
for p in "${deps[@]}"; do dpkg -x "$out/debs/${p}"_*.deb "$out/deps"; done
for p in "${header_only[@]}"; do dpkg -x "$out/debs/${p}"_*.deb "$out/headers"; done
rm -rf "$out/headers/usr/lib" "$out/headers/usr/share"
(cd "$out/debs" && for f in *.deb; do dpkg-deb --show --showformat='${Package} ${Version}\n' "$f"; done) >"$out/debs/MANIFEST"

for d in "${data_dirs[@]}"; do
  [[ -f "$d/meta.json" ]] || { echo "gpu_carry: $d has no meta.json (run loco prepare first)" >&2; exit 1; }
  name=$(basename "$(realpath "$d")")
  rm -rf "${out:?}/data/$name"
  mkdir -p "$out/data"
  cp -r "$d" "$out/data/$name"
done

if ((tree)); then
  mkdir -p "$out/tree"
  # Tracked and untracked-but-not-ignored files as they are now (a tracked file deleted meanwhile is skipped).
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do if [[ -e "$f" ]]; then printf '%s\0' "$f"; fi; done | tar --null -T - -cf -) |
    tar -xf - -C "$out/tree"
fi

summary="$(wc -l <"$out/debs/MANIFEST") packages"
((${#data_dirs[@]})) && summary+=", data: ${data_dirs[*]}"
((tree)) && summary+=", source snapshot in tree/"
echo "gpu_carry: $(du -sh "$out" | cut -f1) in $out ($summary)"
