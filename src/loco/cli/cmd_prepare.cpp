// loco prepare --input PATH [PATH...] --out DIR [--vocab-size N | --tokenizer byte | --tokenizer-from DIR]
//              [--val-fraction F] [--seed S] [--text-field NAME] [--tokenizer-sample-mb MB] [--threads N]
// Tokenizes a corpus into DIR (tokenizer, train/val shards, meta.json); progress goes to stderr,
// the summary to stdout.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/data/corpus_stream.h"
#include "loco/data/loco_made.h"
#include "loco/data/prepare.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"

namespace loco::cli {

namespace {

struct PrepareArgs {
  std::vector<std::string> inputs;
  data::PrepareOptions options;
  bool vocab_size_given = false;
  bool tokenizer_given = false;
  bool sample_given = false;
};

void run_prepare(const PrepareArgs& args) {
  if (args.vocab_size_given && args.options.tokenizer == "byte") {
    throw ConfigError(
        "--vocab-size applies to the BPE tokenizer only; the byte tokenizer always has 258 tokens "
        "(256 bytes, BOS, EOS). Drop --vocab-size or --tokenizer byte.");
  }
  if (args.sample_given && args.options.tokenizer == "byte") {
    throw ConfigError(
        "--tokenizer-sample-mb sizes the text a BPE tokenizer is trained on; the byte tokenizer is not trained. "
        "Drop --tokenizer-sample-mb or --tokenizer byte.");
  }
  if (!args.options.tokenizer_from.empty() && (args.vocab_size_given || args.tokenizer_given || args.sample_given)) {
    throw ConfigError(
        "--tokenizer-from uses the tokenizer of another directory as it is; --tokenizer, --vocab-size and "
        "--tokenizer-sample-mb choose a new one. Drop one or the other.");
  }
  data::PrepareOptions options = args.options;
  options.inputs.assign(args.inputs.begin(), args.inputs.end());
  // --out may be an unfinished prepare's directory, which is done again (a finished one prepare refuses by its
  // own words): then only what holds it is checked. Otherwise neither it nor what holds it may be a data
  // directory, a checkpoint or a run's checkpoints/ (before: --out RUN/checkpoints/step_9, or RUN/checkpoints
  // itself, was written, and the run's next resume refused it).
  if (!options.out_dir.empty()) {
    const std::filesystem::path out = without_trailing_separator(std::filesystem::absolute(options.out_dir));
    const char* made = data::loco_made(out);
    if (made == data::kInterruptedPreparation || made == data::kPreparedDataDirectory) {
      refuse_data_and_checkpoint_directories(out.parent_path(), "--out's directory");
    } else {
      refuse_data_and_checkpoint_directories(options.out_dir, "--out");
    }
  }

  const auto start = SteadyClock::now();
  data::PrepareSummary summary = data::prepare_dataset(options);
  const double seconds = seconds_since(start);

  std::uint64_t tokens = summary.train_tokens + summary.val_tokens;
  fmt::print("prepared {}\n", options.out_dir.string());
  fmt::print("  documents   {}\n", summary.documents);
  fmt::print("  tokens      {} train, {} val\n", summary.train_tokens, summary.val_tokens);
  fmt::print("  vocabulary  {} ({})\n", summary.vocab_size,
             options.tokenizer_from.empty() ? options.tokenizer : "from " + options.tokenizer_from.string());
  fmt::print("  time        {:.1f} s ({:.0f} tokens/s, {:.1f} MB/s of input)\n", seconds,
             tokens / std::max(seconds, 1e-9), summary.input_bytes / 1e6 / std::max(seconds, 1e-9));
  // Whole documents go to one split, and at least one to validation: a corpus of few documents gives it far
  // more than asked, which training then never sees.
  const double val_share = tokens == 0 ? 0 : static_cast<double>(summary.val_tokens) / static_cast<double>(tokens);
  if (options.val_fraction > 0 && val_share > std::max(3 * options.val_fraction, 0.05)) {
    loco::print_unchecked(
        stderr,
        "loco prepare: warning: the validation split holds {:.0f}% of the tokens (--val-fraction {:g} asked): "
        "a document is never split between train and validation, and this corpus has only {} (a text file "
        "is one per part of about {} KiB). Add text for a smaller share, or pass --val-fraction 0 to train on "
        "all of it without validation data\n",
        100 * val_share, options.val_fraction, summary.documents, data::kTextPartBytes >> 10);
  }
}

}  // namespace

void add_prepare_command(CLI::App& app) {
  auto args = std::make_shared<PrepareArgs>();
  CLI::App* cmd = app.add_subcommand("prepare", "Tokenize a corpus into token shards for training");
  set_example(cmd, "loco prepare --input corpus/ more.jsonl --out data/mine --vocab-size 8192");
  cmd->add_option("--input", args->inputs,
                  "text files, directories of them (recursively), JSON Lines files (.jsonl, .ndjson, or .json: one "
                  "document per line), JSON array files (.json beginning with '['), CSV and TSV files (.csv, .tsv: "
                  "one document per row), any of them compressed as .gz, .zst, .xz or .bz2; Parquet and Arrow "
                  "files (.parquet, .arrow, .arrows, .feather: one document per row)")
      ->required()
      ->check(path_given());
  cmd->add_option("--out", args->options.out_dir, "new directory for the tokenizer, shards and meta.json")
      ->required()
      ->check(path_given());
  cmd->add_option_function<std::string>(
         "--tokenizer",
         [args](const std::string& kind) {
           args->options.tokenizer = kind;
           args->tokenizer_given = true;
         },
         "bpe (sentencepiece, trained here; default) or byte")
      ->check(CLI::IsMember({"bpe", "byte"}));
  cmd->add_option("--tokenizer-from", args->options.tokenizer_from,
                  "encode with the tokenizer of this prepared data directory or checkpoint, to share one "
                  "vocabulary across corpora")
      ->check(path_given());
  cmd->add_option_function<double>(
         "--tokenizer-sample-mb",
         [args](double megabytes) {
           args->options.tokenizer_sample_bytes = static_cast<std::uint64_t>(megabytes * 1e6);
           args->sample_given = true;
         },
         "MB of text (a seeded sample of the train documents) the BPE tokenizer is trained on (default 32)")
      ->check(number_in(0.001, 1e6));
  cmd->add_option_function<std::uint64_t>(
         "--vocab-size",
         [args](std::uint64_t size) {
           args->options.vocab_size = size;
           args->vocab_size_given = true;
         },
         "BPE vocabulary size (default 8192)")
      ->check(whole_number_at_least(1));
  cmd->add_option("--val-fraction", args->options.val_fraction,
                  "probability that a document is held out for validation")
      ->check(finite_number())
      ->capture_default_str();
  cmd->add_option("--threads", args->options.threads, "encoding threads (default: one per core)")
      ->check(whole_number_at_least(1));
  cmd->add_option("--seed", args->options.seed, "seed of the train/val split and of the tokenizer's sample")
      ->check(whole_number_at_least(0))
      ->capture_default_str();
  cmd->add_option("--text-field", args->options.text_field,
                  "the top-level field of each JSON line, array element or object, or the column of a CSV, TSV, "
                  "Parquet or Arrow file, "
                  "that holds the text")
      ->capture_default_str();
  cmd->callback([args, cmd] {
    args->options.text_field_given = cmd->count("--text-field") > 0;
    run_prepare(*args);
  });
}

}  // namespace loco::cli
