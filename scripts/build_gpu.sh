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

# The compression libraries (zlib, zstd, liblzma, libbz2, liblz4): the machine's own when it has the header; else the
# carried header (scripts/gpu_carry.sh) with the machine's runtime library, named to CMake by its variables.
library_args=()
use_carried_header() {  # HEADER SONAME INCLUDE_VARIABLE LIBRARY_VARIABLE...
  local header=$1 soname=$2 include_var=$3 library
  shift 3
  [[ -f /usr/include/$header ]] && return 0
  library=$(ldconfig -p | awk -v name="$soname" '$1 == name { print $NF; exit }')
  [[ -n "$library" && -f "$CARRY/headers/usr/include/$header" ]] || {
    echo "build_gpu: no $header on this machine and none carried, or no $soname (run scripts/gpu_carry.sh again?)" >&2
    exit 1
  }
  library_args+=(-D"$include_var=$CARRY/headers/usr/include")
  for variable in "$@"; do library_args+=(-D"$variable=$library"); done
}
use_carried_header zlib.h libz.so.1 ZLIB_INCLUDE_DIR ZLIB_LIBRARY
use_carried_header zstd.h libzstd.so.1 ZSTD_INCLUDE_DIR ZSTD_LIBRARY
use_carried_header lzma.h liblzma.so.5 LIBLZMA_INCLUDE_DIR LIBLZMA_LIBRARY LIBLZMA_LIBRARY_RELEASE
use_carried_header bzlib.h libbz2.so.1.0 BZIP2_INCLUDE_DIR BZIP2_LIBRARY_RELEASE BZIP2_LIBRARIES
use_carried_header lz4frame.h liblz4.so.1 LZ4_INCLUDE_DIR LZ4_LIBRARY

# shellcheck disable=SC2086
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$DEPS;$GTEST" \
  -DLOCO_FMT_HEADER_ONLY=ON "${library_args[@]}" ${CMAKE_ARGS:-}
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$JOBS" ${BUILD_ARGS:-}
echo "build_gpu: built $BUILD/loco against torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
