#!/usr/bin/env bash
# The test suite: installs what is missing, builds, and runs every test through CTest.
# Usage: scripts/test.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
scripts/setup.sh "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 600
