#!/usr/bin/env bash
# Installs everything loco needs from Debian's packages, then configures and builds it.
# Idempotent: packages already present are skipped, an existing build is reused (ccache + ninja).
# Usage: scripts/setup.sh [BUILD_DIR [TARGET...]]   (default: build, every target)
#   The quick start builds only `loco` (and the tokenizer plugin it loads); the test suite builds all.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
targets=("${@:2}")

# Why each package is here: docs/dependencies.md.
packages=(
  g++ cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-pthread libgloo-dev
  libsentencepiece-dev zlib1g-dev libzstd-dev liblzma-dev libbz2-dev libsnappy-dev liblz4-dev libflatbuffers-dev
  libcli11-dev libtoml11-dev nlohmann-json3-dev libfmt-dev libcpp-httplib-dev libssl-dev
  googletest libgtest-dev libgmock-dev
  python3 python3-torch python3-numpy
  gnuplot-nox zstd
)
# The test suite (every target) also loads the dashboard in a headless browser; the quick start does not.
if ((${#targets[@]} == 0)); then
  packages+=(chromium-headless-shell fonts-dejavu-core)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Without OpenBLAS the BLAS alternative is the reference BLAS and matmul is ~14x slower.
if ! readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 | grep -q openblas; then
  echo "setup: warning: libblas.so.3 does not point to OpenBLAS; matmul will be slow" >&2
fi

# The test suite reads the Hugging Face tokenizer that `loco export` writes with Hugging Face's tokenizers.js
# (npm, pinned, into the build directory). Where npm's registry cannot be reached, that test is skipped.
tokenizers_js="@huggingface/tokenizers@0.2.0"
tokenizers_js_dir="$build_dir/reference/tokenizers-js"
if ((${#targets[@]} == 0)) && [ ! -f "$tokenizers_js_dir/package/dist/tokenizers.mjs" ]; then
  mkdir -p "$tokenizers_js_dir"
  if ! (cd "$tokenizers_js_dir" && command -v npm >/dev/null && npm pack --silent "$tokenizers_js" >/dev/null &&
    tar xzf huggingface-tokenizers-*.tgz && rm huggingface-tokenizers-*.tgz); then
    echo "setup: warning: could not fetch $tokenizers_js with npm; the test of the exported tokenizer is skipped" >&2
  fi
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
