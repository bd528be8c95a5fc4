#include "loco/data/prepare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <regex>
#include <thread>
#include <utility>
#include <vector>

#include "loco/data/corpus_files.h"
#include "loco/data/corpus_stream.h"
#include "loco/data/dataset_meta.h"
#include "loco/data/dataset_writer.h"
#include "loco/data/document_split.h"
#include "loco/data/encode_pipeline.h"
#include "loco/data/loco_made.h"
#include "loco/data/progress_line.h"
#include "loco/data/sentencepiece_tokenizer.h"
#include "loco/data/shard.h"
#include "loco/data/text.h"
#include "loco/data/tokenizer.h"
#include "loco/data/tokenizer_sample.h"
#include "loco/util/directory_lock.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"
#include "loco/util/utf8.h"

namespace loco::data {

namespace {

template <typename... Args>
void progress(fmt::format_string<Args...> format, Args&&... args) {
  // One line each, whatever the names of the corpus's files hold (a newline, an ESC sequence).
  loco::print_unchecked(stderr, "prepare: {}\n",
                        escape_control_characters(fmt::format(format, std::forward<Args>(args)...), false));
}

constexpr unsigned kMostPrepareThreads = 1024;

void check_options(const PrepareOptions& options) {
  if (options.out_dir.empty()) throw ConfigError("no output directory; pass --out DIR.");
  if (options.tokenizer != "bpe" && options.tokenizer != "byte") {
    throw ConfigError(fmt::format("unknown tokenizer '{}'; use bpe or byte.", options.tokenizer));
  }
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    throw ConfigError(fmt::format("--val-fraction must be at least 0 and below 1, got {}.", options.val_fraction));
  }
  if (options.text_field.empty()) {
    throw ConfigError(
        "--text-field is empty; name the field of each JSON record, or the column of a CSV, Parquet or Arrow file, "
        "that holds its text (default: text).");
  }
  // Threads beyond the cores do not encode faster; a number in the thousands only exhausts the process's
  // threads and memory.
  if (options.threads > kMostPrepareThreads) {
    throw ConfigError(fmt::format("--threads {} is more encoding threads than any machine has cores; give at most {} "
                                  "(or leave it out: one per core)", options.threads, kMostPrepareThreads));
  }
  const bool trains_bpe = options.tokenizer == "bpe" && options.tokenizer_from.empty();
  if (trains_bpe && options.vocab_size < kFewestBpeTokens) {
    throw ConfigError(fmt::format(
        "--vocab-size {} is too small for a BPE vocabulary: its 256 byte tokens and 3 special tokens alone are {}, "
        "and each character of the corpus needs one more. Pass a --vocab-size well above {} (the default is 8192) "
        "or use --tokenizer byte.",
        options.vocab_size, kFewestBpeTokens, kFewestBpeTokens));
  }
  if (trains_bpe && options.vocab_size > kMostBpeTokens) {
    throw ConfigError(fmt::format("--vocab-size {} is more tokens than loco trains a BPE vocabulary of (at most {}; "
                                  "vocabularies in use have 32k to 256k). Pass a smaller --vocab-size.",
                                  options.vocab_size, kMostBpeTokens));
  }
  if (options.tokenizer_sample_bytes == 0) {
    throw ConfigError("--tokenizer-sample-mb must be above 0: the BPE tokenizer needs text to train on.");
  }
  // Before: the run's own "did not finish" marker was taken for the directory's, and blamed.
  if (!options.tokenizer_from.empty() && without_trailing_separator(fs::weakly_canonical(options.tokenizer_from)) ==
                                             without_trailing_separator(fs::weakly_canonical(options.out_dir))) {
    throw ConfigError(
        fmt::format("--tokenizer-from {} names the --out directory, which this run writes: give the "
                    "directory of an earlier `loco prepare` (or a checkpoint) whose tokenizer to use",
                    options.tokenizer_from.string()));
  }
}

void refuse_prepared_directory(const fs::path& out_dir) {
  if (fs::exists(out_dir / kMetaFileName)) {
    throw DataError(
        fmt::format("{} already holds a prepared dataset (it has a meta.json); nothing was overwritten. Choose "
                    "another --out directory or delete this one.",
                    out_dir.string()));
  }
}

// What an interrupted `loco prepare` leaves in its directory: the marker it wrote first, the
// tokenizer files, finished shards and temporary files. With the marker they are removed, so a re-run
// starts clean (and no shard of an earlier, longer run survives next to the new ones). Without it
// such files belong to something else (a checkpoint holds tokenizer files too) and are not touched.
// Anything else in the directory is left alone.
// The files `loco prepare` writes into its directory, besides meta.json and the marker: tokenizer files,
// shards and their temporary files.
std::vector<fs::path> prepare_outputs_in(const fs::path& out_dir) {
  static const std::regex output(
      R"(\.?(tokenizer\.json|tokenizer\.model|(train|val)_[0-9]+\.bin)(\.tmp-[0-9]+)?|\.meta\.json\.tmp-[0-9]+|)"
      R"(\.\.loco-prepare-incomplete\.tmp-[0-9]+|)"  // the marker's own temporary file, of a run killed writing it
      R"(\.loco-write-test-[0-9]+)");                // the write probe (util/fs.h), of a run killed right after it
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), output)) {
      found.push_back(entry.path());
    }
  }
  return found;
}

// The first entry of out_dir that `loco prepare` does not write (its outputs and the marker); nullopt when none.
std::optional<fs::path> foreign_entry(const fs::path& out_dir, const std::vector<fs::path>& outputs) {
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    const bool ours = entry.path().filename() == kPrepareMarkerFileName ||
                      std::find(outputs.begin(), outputs.end(), entry.path()) != outputs.end();
    if (!ours) return entry.path();
  }
  return std::nullopt;
}

// What an interrupted `loco prepare` left in `out_dir`; throws, reading only, when the directory holds anything
// else (so that nothing, not even a write probe or a lock file, goes into a directory that is refused).
std::vector<fs::path> interrupted_run_outputs(const fs::path& out_dir) {
  try {
    std::vector<fs::path> found = prepare_outputs_in(out_dir);
    // The marker, or its temporary file, or the write probe: a run killed while it wrote the marker, or right after
    // it probed the directory, wrote nothing else.
    const bool interrupted = fs::exists(out_dir / kPrepareMarkerFileName) ||
                             std::any_of(found.begin(), found.end(), [](const fs::path& path) {
                               const std::string name = path.filename().string();
                               return name.rfind(std::string(".") + kPrepareMarkerFileName, 0) == 0 ||
                                      name.rfind(".loco-write-test-", 0) == 0;
                             });
    if (!found.empty() && !interrupted) {
      throw DataError(fmt::format(
          "{} holds {} but was not written by an interrupted `loco prepare` (it has no {}): it may be a checkpoint "
          "or another tool's output. Nothing was touched; choose a new or empty --out directory.",
          out_dir.string(), found.front().filename().string(), kPrepareMarkerFileName));
    }
    // Only into a new or empty directory: prepare's files beside another's could be taken for part of it, or
    // another's for part of the dataset (as root, `--out /` had written shards into /).
    if (const std::optional<fs::path> other = foreign_entry(out_dir, found)) {
      throw DataError(fmt::format("{} is not empty: it holds {}, which `loco prepare` did not write. Nothing was "
                                  "touched; choose a new or empty --out directory.",
                                  out_dir.string(), other->filename().string()));
    }
    return found;
  } catch (const fs::filesystem_error& e) {
    throw IoError(
        fmt::format("cannot read {}: {}. Check the directory's permissions.", out_dir.string(), e.code().message()));
  }
}

void clear_interrupted_run(const fs::path& out_dir) {
  const std::vector<fs::path> found = interrupted_run_outputs(out_dir);
  try {
    if (!found.empty()) progress("removing {} files an interrupted run left in {}", found.size(), out_dir.string());
    for (const auto& path : found) fs::remove(path);
  } catch (const fs::filesystem_error& e) {
    throw IoError(fmt::format("cannot clear {}: {}. Check the directory's permissions.", out_dir.string(),
                              e.code().message()));
  }
  write_file_atomic(out_dir / kPrepareMarkerFileName,
                    "loco prepare is writing this directory; it is complete once meta.json exists.\n");
}

// The directories of `dir` that do not exist yet, deepest first: those this run creates for --out.
std::vector<fs::path> missing_directories(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code unreadable;
  for (fs::path path = fs::absolute(dir).lexically_normal(); path.has_relative_path() && !fs::exists(path, unreadable);
       path = path.parent_path()) {
    missing.push_back(path);
  }
  return missing;
}

// Removes what this run wrote into out_dir (it holds the marker), and the directories this run created for it
// (`created`, deepest first) where nothing else is in them. Best effort: what cannot be listed or removed stays
// with the marker, and the next run clears it up.
void take_back_outputs(const fs::path& out_dir, const std::vector<fs::path>& created) noexcept {
  std::error_code ignored;
  try {
    for (const fs::path& path : prepare_outputs_in(out_dir)) fs::remove(path, ignored);
  } catch (const fs::filesystem_error&) {
    return;
  }
  fs::remove(out_dir / kPrepareMarkerFileName, ignored);
  for (const fs::path& directory : created) fs::remove(directory, ignored);  // removes only an empty directory
}

unsigned thread_count(const PrepareOptions& options) {
  return options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
}

std::uint64_t total_bytes(const std::vector<CorpusFile>& files) {
  std::uint64_t total = 0;
  for (const auto& file : files) total += file.bytes;
  return total;
}

std::string describe_inputs(const std::vector<fs::path>& inputs) {
  std::string out;
  for (const auto& input : inputs) out += (out.empty() ? "" : ", ") + input.string();
  return out;
}

// The first pass of a BPE run: a seeded sample of the train documents (tokenizer_sample.h), without
// the document a tiny corpus will move to val (document_split.h), so the tokenizer never sees val.
std::vector<std::string> sample_train_documents(const PrepareOptions& options, const std::vector<CorpusFile>& files,
                                                const DocumentSplit& split) {
  TokenizerSample sample(options.tokenizer_sample_bytes, options.seed);
  ValidationFallback fallback(options.val_fraction > 0);
  std::uint64_t candidate_priority = 0, documents = 0;
  ProgressLine line("sampling text for the tokenizer", total_bytes(files));
  CorpusStream stream(files, options.text_field, /*utf8_only=*/true);  // for BPE training
  for (RawDocument document; stream.next(document);
       line.update(stream.file_bytes_read(), stream.document_bytes_read(), ++documents)) {
    const std::uint64_t hash = split.hash(document.file, document.line);
    const std::uint64_t priority = sample.priority(document.file, document.line);
    const bool in_val = split.in_validation(hash);
    const bool wanted = !in_val && sample.wants(priority);
    // Most lines are neither: their JSON is never parsed. While the fallback is undecided every
    // document counts, and a blank one must not (the writer never sees it).
    if (!wanted && !fallback.undecided()) continue;
    std::string text = document_text(std::move(document), files, options.text_field);
    if (is_blank(text)) continue;
    if (fallback.observe(hash, in_val) == ValidationFallback::Role::candidate) candidate_priority = priority;
    if (wanted) sample.offer(priority, std::move(text));
  }
  if (fallback.undecided() && fallback.has_candidate()) {
    if (fallback.documents() == 1) throw single_document_error();
    sample.remove(candidate_priority);  // the writer will move it to val
  }
  if (sample.size() == 0) {
    throw DataError(fmt::format(
        "no text to train the tokenizer on in {}: every document is blank or fell in the validation split "
        "(--val-fraction {}). Pass files that contain text, or a smaller --val-fraction.",
        describe_inputs(options.inputs), options.val_fraction));
  }
  progress("sampled {} train documents, {:.1f} MB of text, in {:.1f} s", sample.size(), sample.bytes() / 1e6,
           line.seconds());
  return sample.take_texts();
}

// Writes the tokenizer files into out_dir and loads them back, so that what encodes is exactly
// what later runs will load.
std::unique_ptr<Tokenizer> build_tokenizer(const PrepareOptions& options, const std::vector<CorpusFile>& files,
                                           const DocumentSplit& split) {
  if (!options.tokenizer_from.empty()) {
    // An unfinished prepare's tokenizer is no data directory's: redone with other options, it is replaced, and
    // what was encoded with it stands alone (train and eval refuse that directory).
    // meta.json marks a prepare complete: a marker beside it is that of a run killed after writing it.
    std::error_code unknown;
    if (fs::exists(options.tokenizer_from / kPrepareMarkerFileName, unknown) &&
        !fs::exists(options.tokenizer_from / kMetaFileName, unknown)) {
      throw DataError(
          fmt::format("--tokenizer-from {} is a loco prepare that did not finish (it holds {}): its "
                      "tokenizer belongs to no prepared data. Run that prepare again to its end, or "
                      "take the tokenizer of a finished one",
                      options.tokenizer_from.string(), kPrepareMarkerFileName));
    }
    load_tokenizer(options.tokenizer_from);  // checked where it is: a broken one is named there, not in --out
    copy_tokenizer_files(options.tokenizer_from, options.out_dir);
    progress("using the tokenizer of {} ({})", options.tokenizer_from.string(), tokenizer_hash(options.out_dir));
  } else if (options.tokenizer == "byte") {
    write_tokenizer_info(options.out_dir, ByteTokenizer::info());
  } else {
    std::vector<std::string> texts = sample_train_documents(options, files, split);
    auto start = SteadyClock::now();
    progress("training a sentencepiece BPE tokenizer with {} tokens", options.vocab_size);
    std::size_t next = 0;
    DocumentSource source = [&](std::string& text) {
      if (next == texts.size()) return false;
      text = std::move(texts[next++]);
      return true;
    };
    {
      const PeriodicNotice notice("training the tokenizer",
                                  "text without spaces (CJK, base64, minified JSON) trains up to 20 times slower per "
                                  "MB than prose: a smaller --tokenizer-sample-mb trains faster",
                                  30);
      train_sentencepiece_bpe(source, static_cast<std::uint32_t>(options.vocab_size), options.out_dir);  // checked
    }
    progress("trained the tokenizer in {:.1f} s", seconds_since(start));
  }
  return load_tokenizer(options.out_dir);
}

// The encoding pass: reads the documents (this thread), encodes them (the pipeline's threads) and
// writes them in corpus order. At most threads + 2 batches of limits.batch_bytes of input are in
// flight (one on each thread and two waiting), which bounds the memory of this pass.
DatasetWriter::Splits encode_corpus(const PrepareOptions& options, const std::vector<CorpusFile>& files,
                                    const DocumentSplit& split, const Tokenizer& tokenizer,
                                    const PrepareLimits& limits) {
  const unsigned threads = thread_count(options);
  EncodePipeline pipeline(tokenizer, files, options.text_field, threads);
  DatasetWriter writer(options.out_dir, split, options.val_fraction > 0, bytes_per_token_for(tokenizer.vocab_size()),
                       limits.tokens_per_shard);
  const std::uint64_t max_in_flight = threads + 2;
  auto write_until = [&](std::uint64_t in_flight) {
    while (pipeline.in_flight() > in_flight) {
      for (auto& document : pipeline.take()) writer.write(std::move(document));
    }
  };
  ProgressLine line("encoding", total_bytes(files));
  CorpusStream stream(files, options.text_field, /*utf8_only=*/tokenizer.kind() != ByteTokenizer::info().kind);
  std::vector<RawDocument> batch;
  std::uint64_t batch_bytes = 0;
  for (RawDocument document; stream.next(document);) {
    batch_bytes += document.bytes.size();
    batch.push_back(std::move(document));
    if (batch_bytes < limits.batch_bytes) continue;
    pipeline.submit(std::exchange(batch, {}));
    batch_bytes = 0;
    write_until(max_in_flight - 1);
    line.update(stream.file_bytes_read(), stream.document_bytes_read(), writer.documents());
  }
  if (!batch.empty()) pipeline.submit(std::move(batch));
  write_until(0);
  if (writer.documents() == 0) {
    throw DataError(fmt::format("no text found in {}; pass files or directories that contain text.",
                                describe_inputs(options.inputs)));
  }
  progress("encoded {} documents in {:.1f} s ({:.1f} MB/s of input on {} threads)", writer.documents(),
           line.seconds(), total_bytes(files) / 1e6 / std::max(line.seconds(), 1e-9), threads);
  return writer.finish();
}

// Says what the inputs hold but is not read: one line each, the hidden entries together.
void report_skipped(const std::vector<SkippedInput>& skipped) {
  std::vector<std::string> hidden;
  for (const SkippedInput& input : skipped) {
    if (input.hidden) {
      hidden.push_back(input.path.string());
    } else {
      progress("skipped {}: {}", input.path.string(), input.reason);
    }
  }
  if (hidden.empty()) return;
  constexpr std::size_t kNamed = 3;
  const std::size_t count = hidden.size();
  const std::string more = count > kNamed ? fmt::format(" and {} more", count - kNamed) : "";
  hidden.resize(std::min(count, kNamed));
  progress("skipped {} hidden {} (names beginning with '.'; name one in --input to read it): {}{}", count,
           count == 1 ? "entry" : "entries", fmt::join(hidden, ", "), more);
}

// The tokenizer, the encoding pass and meta.json, into a directory cleared for them.
PrepareSummary prepare_into(const PrepareOptions& options, const PrepareLimits& limits,
                            const std::vector<CorpusFile>& files) {
  progress("{} files, {:.1f} MB", files.size(), total_bytes(files) / 1e6);
  const DocumentSplit split(options.val_fraction, options.seed);
  std::unique_ptr<Tokenizer> tokenizer = build_tokenizer(options, files, split);

  DatasetMeta meta;
  meta.tokenizer = read_tokenizer_info(options.out_dir).to_json();
  meta.tokenizer_hash = tokenizer_hash(options.out_dir);
  meta.vocab_size = tokenizer->vocab_size();
  meta.bytes_per_token = bytes_per_token_for(meta.vocab_size);
  DatasetWriter::Splits splits = encode_corpus(options, files, split, *tokenizer, limits);
  meta.train = std::move(splits.train);
  meta.val = std::move(splits.val);
  meta.checksums = std::move(splits.checksums);
  for (const auto& input : options.inputs) meta.sources.push_back(input.string());
  meta.val_fraction = options.val_fraction;
  meta.seed = options.seed;
  write_dataset_meta(options.out_dir, meta);  // last: its presence marks the directory complete
  fs::remove(options.out_dir / kPrepareMarkerFileName);

  return PrepareSummary{meta.train.documents + meta.val.documents, meta.train.tokens, meta.val.tokens,
                        meta.vocab_size, total_bytes(files)};
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& options) {
  return prepare_dataset(options, PrepareLimits{kTokensPerShard});
}

PrepareSummary prepare_dataset(const PrepareOptions& options, const PrepareLimits& limits) {
  check_options(options);
  refuse_prepared_directory(options.out_dir);
  std::vector<SkippedInput> skipped;
  const std::vector<CorpusFile> files = list_corpus_files(options.inputs, options.out_dir, &skipped);  // before writing
  report_skipped(skipped);
  // A field named for inputs that have none would be ignored (before: without a word).
  if (options.text_field_given && !files.empty() &&
      std::all_of(files.begin(), files.end(), [](const CorpusFile& f) { return f.format == CorpusFormat::text; })) {
    throw ConfigError(
        fmt::format("--text-field {} names a field of JSON, CSV, TSV, Parquet or Arrow records, and "
                    "every input is a text file, read whole: drop --text-field",
                    options.text_field));
  }
  if (files.empty()) {
    throw DataError(fmt::format("no corpus files in {}{}; pass files or directories that contain text.",
                                describe_inputs(options.inputs),
                                skipped.empty() ? "" : ": all it holds was skipped, for the reasons said above"));
  }
  if (fs::is_directory(options.out_dir)) interrupted_run_outputs(options.out_dir);  // refused before any write
  const std::vector<fs::path> created = missing_directories(options.out_dir);
  ensure_writable_directory(options.out_dir, "--out directory");
  // Before anything in it is taken for an interrupted run's: a run still writing it holds the lock.
  const DirectoryLock writing(options.out_dir, "--out directory");
  refuse_prepared_directory(options.out_dir);  // again: one may have finished while this run listed its corpus
  clear_interrupted_run(options.out_dir);
  try {
    return prepare_into(options, limits, files);
  } catch (...) {
    // A refused corpus (blank, a broken archive, a bad --tokenizer-from) leaves nothing behind: what this run
    // wrote is removed, and the directories this run created for it. (A killed run leaves its marker, and
    // the next run clears up: clear_interrupted_run.)
    take_back_outputs(options.out_dir, created);
    throw;
  }
}

}  // namespace loco::data
