#!/usr/bin/env bash
# The quick start: set up everything, fetch and prepare the Brown corpus, train a small Llama for a
# few minutes on the CPU, then print what it learned (validation loss, perplexity, a sample).
# Re-running reuses the build and the prepared data, and starts a fresh run directory.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build loco   # the binary and its tokenizer plugin; scripts/test.sh builds the tests
loco=build/loco

scripts/fetch_brown.sh data/brown-text
if [ ! -f data/brown/meta.json ]; then
  "$loco" prepare --input data/brown-text --out data/brown --vocab-size 4096 --val-fraction 0.02
fi

run_dir=runs/brown-$(date +%Y%m%d-%H%M%S)
"$loco" train --config configs/brown.toml --set train.out_dir="$run_dir"

checkpoint=$(ls -d "$run_dir"/checkpoints/step_* | sort -t_ -k2 -n | tail -n 1)
echo
echo "== what it learned =="
"$loco" eval --checkpoint "$checkpoint" --data data/brown
for prompt in "The jury said" "In the city of" "She looked at"; do
  "$loco" generate --checkpoint "$checkpoint" --prompt "$prompt" --tokens 40 --temperature 0.8 --top-k 40
done
echo
echo "run directory: $run_dir (metrics.jsonl, config.toml, checkpoints/)"
