// `loco prepare` as a user runs it: exit codes, messages and the summary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "loco/util/directory_lock.h"
#include "support/test_support.h"

namespace loco::test {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The smallest corpus prepare accepts with a validation split: two one-line documents.
std::string two_document_corpus(const ScratchDir& dir) {
  write_text(dir / "corpus/a.txt", "alpha\n");
  write_text(dir / "corpus/b.txt", "beta\n");
  return (dir / "corpus").string();
}

// A directory another loco process is writing (it holds the directory's lock: here, this test) is refused
// by `loco prepare --out` and by `loco train` (train.out_dir), by name, and left as it was: before, the second
// run took the first's files for an interrupted run's and removed them, and both wrote into the directory.
TEST(PrepareCli, ADirectoryAnotherProcessIsWritingIsRefused) {
  ScratchDir dir;
  const std::string corpus = two_document_corpus(dir);
  std::filesystem::create_directories(dir / "busy");
  write_text(dir / "busy" / ".loco-prepare-incomplete", "the other run's marker\n");
  write_text(dir / "busy" / "train_000.bin", "the other run's shard");
  const DirectoryLock other_run(dir / "busy", "--out directory");
  CommandResult result =
      run_loco({"prepare", "--input", corpus, "--out", (dir / "busy").string(), "--tokenizer", "byte"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "--out directory '" + (dir / "busy").string() +
                                          "' is being written by another loco process right now"))
      << result.output;
  EXPECT_EQ(read_text(dir / "busy" / "train_000.bin"), "the other run's shard");
  EXPECT_FALSE(std::filesystem::exists(dir / "busy" / "meta.json"));

  ASSERT_EQ(run_loco({"prepare", "--input", corpus, "--out", (dir / "data").string(), "--tokenizer", "byte",
                      "--val-fraction", "0.5"})
                .exit_code,
            0);
  // The same lock keeps a training run out (without the marker: a directory of an unfinished prepare is
  // refused as such before its lock is tried).
  std::filesystem::remove(dir / "busy" / ".loco-prepare-incomplete");
  write_text(dir / "busy" / "metrics.jsonl", "{\"step\": 1}\n");
  result = run_loco({"train", "--config", std::string(LOCO_SOURCE_DIR) + "/configs/tiny.toml", "--set",
                     "data.dir=" + (dir / "data").string(), "--set", "data.seq_len=2", "--set", "train.batch_size=1",
                     "--set", "train.out_dir=" + (dir / "busy").string()});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "train.out_dir '" + (dir / "busy").string() +
                                          "' is being written by another loco process right now"))
      << result.output;
  EXPECT_EQ(read_text(dir / "busy" / "metrics.jsonl"), "{\"step\": 1}\n");
}

TEST(PrepareCli, PreparesAByteTokenizedCorpusAndPrintsASummary) {
  ScratchDir dir;
  write_text(dir / "corpus/a.txt", "The first document.\n");
  write_text(dir / "corpus/b.txt", "The second document.\n");
  CommandResult result = run_loco({"prepare", "--input", (dir / "corpus").string(), "--out", (dir / "out").string(),
                                   "--tokenizer", "byte", "--val-fraction", "0.3"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "documents   2")) << result.output;
  EXPECT_TRUE(contains(result.output, "vocabulary  258 (byte)")) << result.output;
  EXPECT_TRUE(contains(result.output, "tokens/s")) << result.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "out/meta.json"));
}

// A corpus of few documents gives validation far more than --val-fraction (whole documents, at least one):
// said, with what to do. Twenty equal documents at 0.3 give about what was asked: nothing said.
TEST(PrepareCli, AValidationSplitFarAboveTheFractionAskedIsWarnedAbout) {
  ScratchDir dir;
  write_text(dir / "few/a.txt", "The first document.\n");
  write_text(dir / "few/b.txt", "The second document.\n");
  write_text(dir / "few/c.txt", "The third document.\n");
  CommandResult few = run_loco({"prepare", "--input", (dir / "few").string(), "--out", (dir / "few-out").string(),
                                "--tokenizer", "byte"});
  EXPECT_EQ(few.exit_code, 0) << few.output;
  EXPECT_TRUE(contains(few.output, "warning: the validation split holds 3")) << few.output;  // 1 of 3: 33%
  EXPECT_TRUE(contains(few.output, "(--val-fraction 0.01 asked)")) << few.output;
  for (int i = 0; i < 20; ++i) write_text(dir / "many" / (std::to_string(i) + ".txt"), "Some document text.\n");
  CommandResult many = run_loco({"prepare", "--input", (dir / "many").string(), "--out", (dir / "many-out").string(),
                                 "--tokenizer", "byte", "--val-fraction", "0.3"});
  EXPECT_EQ(many.exit_code, 0) << many.output;
  EXPECT_FALSE(contains(many.output, "warning: the validation split")) << many.output;
}

TEST(PrepareCli, TokenizerFromWithAnotherTokenizerChoiceIsAUsageError) {
  ScratchDir dir;
  const std::string corpus = two_document_corpus(dir);
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--vocab-size", "512"},
                                                std::vector<std::string>{"--tokenizer", "byte"},
                                                std::vector<std::string>{"--tokenizer-sample-mb", "8"}}) {
    std::vector<std::string> args{"prepare", "--input", corpus, "--out", (dir / "out").string(), "--tokenizer-from",
                                  (dir / "elsewhere").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult result = run_loco(args);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(contains(result.output, "--tokenizer-from uses the tokenizer of another directory")) << result.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

TEST(PrepareCli, MissingInputPathExitsWithOneAndNamesIt) {
  ScratchDir dir;
  CommandResult result = run_loco({"prepare", "--input", (dir / "nope.txt").string(), "--out", (dir / "out").string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "nope.txt does not exist")) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/meta.json"));
}

TEST(PrepareCli, EmptyCorpusExitsWithOne) {
  ScratchDir dir;
  write_text(dir / "corpus/empty.txt", "\n\n");
  CommandResult result = run_loco(
      {"prepare", "--input", (dir / "corpus").string(), "--out", (dir / "out").string(), "--tokenizer", "byte"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "no text found in")) << result.output;
}

// A corpus refused while it is read (blank, a damaged archive) and a refused input leave --out as it was: a
// directory of the user's keeps only its own files, and those the run created (parents too) are gone again.
TEST(PrepareCli, ARefusedCorpusLeavesNothingInItsOutputDirectory) {
  ScratchDir dir;
  write_text(dir / "mine/notes.txt", "mine\n");
  write_text(dir / "blank.txt", "\n   \n");
  write_text(dir / "damaged.gz", "not gzip at all\n");
  for (const std::string input : {"blank.txt", "damaged.gz", "absent.txt"}) {
    for (const std::string out : {"mine", "new", "new/nested/out/"}) {
      const CommandResult result = run_loco({"prepare", "--input", (dir / input).string(), "--out",
                                             (dir / out).string(), "--tokenizer", "byte"});
      EXPECT_EQ(result.exit_code, 1) << input << ": " << result.output;
      EXPECT_FALSE(std::filesystem::exists(dir / "new")) << input << ": " << result.output;
    }
    std::vector<std::string> left;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "mine")) left.push_back(entry.path().filename());
    EXPECT_EQ(left, std::vector<std::string>{"notes.txt"}) << input;
  }
}

// Encoding threads beyond any machine's cores only exhaust the process: refused before anything is read.
TEST(PrepareCli, ThousandsOfThreadsAreAUsageError) {
  ScratchDir dir;
  write_text(dir / "a.txt", "text\n");
  const CommandResult result = run_loco({"prepare", "--input", (dir / "a.txt").string(), "--out",
                                         (dir / "out").string(), "--tokenizer", "byte", "--threads", "100000"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "--threads 100000 is more encoding threads")) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

TEST(PrepareCli, VocabSizeWithByteTokenizerIsAUsageError) {
  ScratchDir dir;
  write_text(dir / "a.txt", "text\n");
  CommandResult result = run_loco({"prepare", "--input", (dir / "a.txt").string(), "--out", (dir / "out").string(),
                                   "--tokenizer", "byte", "--vocab-size", "512"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "--vocab-size applies to the BPE tokenizer only")) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
  result = run_loco({"prepare", "--input", (dir / "a.txt").string(), "--out", (dir / "out").string(), "--tokenizer",
                     "byte", "--tokenizer-sample-mb", "8"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "the byte tokenizer is not trained")) << result.output;
}

TEST(PrepareCli, RefusesToOverwriteAPreparedDirectory) {
  ScratchDir dir;
  std::vector<std::string> args{"prepare", "--input", two_document_corpus(dir), "--out", (dir / "out").string(),
                                "--tokenizer", "byte"};
  ASSERT_EQ(run_loco(args).exit_code, 0);
  CommandResult again = run_loco(args);
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_TRUE(contains(again.output, "already holds a prepared dataset")) << again.output;
  // Nor is one written inside a prepared directory, a checkpoint or a run's checkpoints/ (before: --out
  // RUN/checkpoints/step_9 was, and the run's next resume refused it as a checkpoint without state.json).
  write_text(dir / "run" / "config.toml", "");
  write_text(dir / "run" / "metrics.jsonl", "");
  std::filesystem::create_directories(dir / "run" / "checkpoints");
  write_text(dir / "ckpt" / "state.json", "{}");
  write_text(dir / "ckpt" / "model.safetensors", "");
  for (const std::filesystem::path& inside :
       {dir / "out" / "sub", dir / "run" / "checkpoints" / "step_9", dir / "run" / "checkpoints",
        dir / "run" / "checkpoints/", dir / "ckpt"}) {
    args[4] = inside.string();
    const CommandResult r = run_loco(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "loco never writes into a data directory") ||
                contains(r.output, "where loco keeps that run's checkpoints only"))
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(inside / "meta.json")) << inside;
    EXPECT_FALSE(std::filesystem::exists(inside / "sub")) << inside;
  }
  // A directory refused is not written into even for a moment: its time of change stays (before: a probe file
  // was created and removed in it before the refusal).
  write_text(dir / "notes" / "mine.txt", "a user's file");
  const auto changed = std::filesystem::last_write_time(dir / "notes");
  args[4] = (dir / "notes").string();
  const CommandResult foreign = run_loco(args);
  EXPECT_EQ(foreign.exit_code, 1) << foreign.output;
  EXPECT_TRUE(contains(foreign.output, "which `loco prepare` did not write. Nothing was touched")) << foreign.output;
  EXPECT_EQ(std::filesystem::last_write_time(dir / "notes"), changed);
}

TEST(PrepareCli, PreparesWithABpeTokenizer) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the river runs over the old stone bridge and under the hill.\n";
  write_text(dir / "corpus/a.txt", text);
  write_text(dir / "corpus/b.txt", text + "a second document.\n");
  CommandResult result = run_loco(
      {"prepare", "--input", (dir / "corpus").string(), "--out", (dir / "out").string(), "--vocab-size", "300"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "vocabulary  300 (bpe)")) << result.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "out/tokenizer.model"));
}

TEST(PrepareCli, MissingSentencepiecePluginIsAClearError) {
  ScratchDir dir;
  const std::string corpus = two_document_corpus(dir);
  ::setenv("LOCO_SENTENCEPIECE_PLUGIN", (dir / "absent.so").c_str(), 1);
  CommandResult result = run_loco({"prepare", "--input", corpus, "--out", (dir / "out").string()});
  ::unsetenv("LOCO_SENTENCEPIECE_PLUGIN");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "cannot load the sentencepiece plugin")) << result.output;
  EXPECT_TRUE(contains(result.output, "absent.so")) << result.output;
  // Empty is unset (before: dlopen("") opened the binary and named it "a plugin from another loco version").
  ::setenv("LOCO_SENTENCEPIECE_PLUGIN", "", 1);
  result = run_loco({"prepare", "--input", corpus, "--out", (dir / "out").string(), "--vocab-size", "265"});
  ::unsetenv("LOCO_SENTENCEPIECE_PLUGIN");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// A file name's control characters are shown, not obeyed by the terminal: an ESC sequence or a carriage return in
// it rewrote the line, a newline forged one (audit round 11).
TEST(PrepareCli, AFileNamesControlCharactersAreShownNotObeyed) {
  ScratchDir dir;
  const std::string name = "a\x1b[2Jb\rc\nloco: prepared.jsonl";
  std::filesystem::create_directories(dir / "corpus");
  write_text(dir / "corpus" / name, "{\"text\": 5}\n");
  write_text(dir / "corpus" / ".hidden\x1b[31m", "x");
  CommandResult result = run_loco(
      {"prepare", "--input", (dir / "corpus").string(), "--out", (dir / "out").string(), "--tokenizer", "byte"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "a\\x1B[2Jb\\x0Dc\nloco: prepared.jsonl:1")) << result.output;
  EXPECT_TRUE(contains(result.output, ".hidden\\x1B[31m")) << result.output;
  EXPECT_FALSE(contains(result.output, "\x1b")) << result.output;
  EXPECT_FALSE(contains(result.output, "\r")) << result.output;
}

TEST(PrepareCli, UnknownTokenizerIsRejectedByTheParser) {
  ScratchDir dir;
  CommandResult result =
      run_loco({"prepare", "--input", "x", "--out", (dir / "out").string(), "--tokenizer", "wordpiece"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_TRUE(contains(result.output, "wordpiece")) << result.output;
}

}  // namespace
}  // namespace loco::test
