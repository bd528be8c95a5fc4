#!/usr/bin/env bash
# Fuzzes loco's parsers with libFuzzer, AddressSanitizer and UBSan (docs/fuzzing.md): installs clang and its
# runtime from Debian when missing (the normal build needs neither), builds the targets of tests/fuzz with
# -DLOCO_FUZZ=ON in a build directory of their own, and runs each in turn from its seed corpus
# (tests/fuzz/corpus/TARGET). An input that crashes, throws an untyped exception, hangs, leaks or trips a
# sanitizer is copied to tests/fuzz/crashes/TARGET/, where the normal suite replays it from then on.
#
# Usage: scripts/fuzz.sh [-t SECONDS] [-b BUILD_DIR] [TARGET...] [-- LIBFUZZER_FLAG...]
#   -t SECONDS    fuzzing time per target (default 600)
#   -b BUILD_DIR  default build-fuzz; what each target learned stays in BUILD_DIR/corpus/TARGET
#   TARGET        safetensors shard dataset_meta checkpoint_state config corpus_file wire http_request (default: all)
# Exit status 1 when a target found something. Example, the CI smoke: scripts/fuzz.sh -t 30
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
build_dir=build-fuzz
while getopts "t:b:h" option; do
  case $option in
    t) seconds=$OPTARG ;;
    b) build_dir=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=()
while (($#)) && [[ $1 != -- ]]; do targets+=("$1"); shift; done
(($#)) && shift
extra_flags=("$@")
((${#targets[@]})) || targets=(safetensors shard dataset_meta checkpoint_state config corpus_file wire http_request)

# clang 14 is Debian 12's; its libclang-rt holds libFuzzer and the sanitizer runtimes, llvm its symbolizer.
llvm=14
missing=()
command -v "clang++-$llvm" >/dev/null || missing+=("clang-$llvm")
compgen -G "/usr/lib/llvm-$llvm/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null ||
  missing+=("libclang-rt-$llvm-dev")
command -v "llvm-symbolizer-$llvm" >/dev/null || missing+=("llvm-$llvm")
if ((${#missing[@]})); then
  echo "fuzz.sh: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-$llvm
export UBSAN_OPTIONS=print_stacktrace=1

mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="clang++-$llvm" \
  -DLOCO_FUZZ=ON -DLOCO_SENTENCEPIECE=OFF >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
fuzzers=()
for target in "${targets[@]}"; do fuzzers+=("loco_${target}_fuzzer"); done
cmake --build "$build_dir" --target "${fuzzers[@]}"

found=0
summary=()
for target in "${targets[@]}"; do
  fuzzer=$build_dir/tests/fuzz/loco_${target}_fuzzer
  learned=$build_dir/corpus/$target
  artifacts=$build_dir/artifacts/$target
  log=$build_dir/logs/$target.log
  mkdir -p "$learned" "$artifacts" "$(dirname "$log")"
  echo "fuzz.sh: $target for $seconds s (log: $log)"
  # New inputs go to the first directory (the learned corpus); the seeds and past crashes stay as committed.
  # -timeout: an input running longer is a hang.
  status=0
  inputs=("$learned" "tests/fuzz/corpus/$target")
  [[ -d tests/fuzz/crashes/$target ]] && inputs+=("tests/fuzz/crashes/$target")
  "$fuzzer" "${inputs[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${extra_flags[@]}" >"$log" 2>&1 &
  pid=$!
  wait "$pid" || status=$?
  rm -rf "${TMPDIR:-/tmp}/loco-fuzz-$pid"  # the target's scratch files, left behind by a crash
  stats=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' ||
         grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  outcome="no findings"
  shopt -s nullglob
  findings=("$artifacts"/crash-* "$artifacts"/timeout-* "$artifacts"/leak-* "$artifacts"/oom-*)
  shopt -u nullglob
  if ((status != 0 || ${#findings[@]})); then
    found=1
    outcome="FOUND (exit $status): ${#findings[@]} input(s) kept in tests/fuzz/crashes/$target/"
    mkdir -p "tests/fuzz/crashes/$target"
    for input in "${findings[@]}"; do mv "$input" "tests/fuzz/crashes/$target/"; done
    echo "---- $target: the report (full log: $log)"
    grep -E -A 12 'ERROR: |runtime error|deadly signal|uncaught|invariant broken|Test unit written' "$log" | head -n 60
    echo "----"
  fi
  summary+=("$(printf '%-17s %6s s  %12s runs  %-22s %s' "$target" "$seconds" "${runs:-?}" "${stats:-?}" "$outcome")")
done

echo
echo "fuzz.sh: results"
printf '%s\n' "${summary[@]}"
exit "$found"
