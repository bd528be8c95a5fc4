#!/usr/bin/env bash
# Run on a GPU machine (no network needed): configures and builds loco against the libtorch inside
# the machine's PyTorch wheel, with the Debian packages that scripts/gpu_carry.sh gathered. docs/build.md.
#
#   scripts/build_gpu.sh [CARRY_DIR] [BUILD_DIR]      defaults: .gpu and build-cuda in the source tree
#
# The source tree is the one this script lies in. Environment: PYTHON (python3: the one with torch),
# JOBS (nproc), CMAKE_ARGS (more arguments for the configure step, e.g. -DLOCO_BUILD_TESTS=OFF),
# BUILD_ARGS (more arguments for the build step, e.g. "-- -k 0" to see every compile error at once).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARRY=$(realpath "${1:-$SRC/.gpu}")
BUILD=$(realpath -m "${2:-$SRC/build-cuda}")
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
DEPS=$CARRY/deps/usr
[[ -d "$DEPS/include/nlohmann" ]] || { echo "build_gpu: no $DEPS/include/nlohmann: run scripts/gpu_carry.sh and bring its folder" >&2; exit 1; }

TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
# Torch's CMake config looks for the CUDA toolkit (nvcc) though loco compiles no CUDA code itself.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}

# googletest from the Debian sources, installed under the build folder.
GTEST=$BUILD/_deps/googletest
if [[ ! -d "$GTEST/lib/cmake/GTest" ]]; then
  cmake -S "$DEPS/src/googletest" -B "$BUILD/_deps/googletest-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$GTEST" -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_GMOCK=ON >/dev/null
  cmake --build "$BUILD/_deps/googletest-build" -j "$JOBS" >/dev/null
  cmake --install "$BUILD/_deps/googletest-build" >/dev/null
fi

# zlib: the machine's own when it has the headers; else the carried headers with its libz.so.1.
zlib_args=()
if [[ ! -f /usr/include/zlib.h ]]; then
  libz=$(ldconfig -p | awk '$1 == "libz.so.1" { print $NF; exit }')
  [[ -n "$libz" && -f "$CARRY/zlib/usr/include/zlib.h" ]] || { echo "build_gpu: no zlib (headers or libz.so.1)" >&2; exit 1; }
  zlib_args=(-DZLIB_INCLUDE_DIR="$CARRY/zlib/usr/include" -DZLIB_LIBRARY="$libz")
fi

# shellcheck disable=SC2086
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$DEPS;$GTEST" \
  -DLOCO_FMT_HEADER_ONLY=ON "${zlib_args[@]}" ${CMAKE_ARGS:-}
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$JOBS" ${BUILD_ARGS:-}
echo "build_gpu: built $BUILD/loco against torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
