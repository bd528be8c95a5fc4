// Checkpoints and data directories altered by someone who knows the format: the checksums in state.json are
// recomputed after each change, so only loco's checks of the format itself stand between the altered file
// and a model (docs/security.md, "What was tried"). Each case asserts the exit code, a message that names
// the problem, bounded time (run_loco_within) and that the checkpoint or data directory is left as it was.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "loco/util/fs.h"
#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::run_loco;
using test::run_loco_within;
using test::ScratchDir;
using test::write_text;

constexpr int kBound = 60;  // seconds: each command ends well within it, or the case fails with exit 124

class HostileCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    test::prepare_tiny_byte_data(dir_->path());
    write_text(*dir_ / "run.toml", test::tiny_model_toml(data().string()) + fmt::format(R"([train]
steps = 4
batch_size = 4
eval_every = 0
log_every = 1
out_dir = "{}"
)",
                                                                                        (*dir_ / "run").string()));
    const auto trained = run_loco({"train", "--config", (*dir_ / "run.toml").string()});
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static fs::path data() { return *dir_ / "data"; }
  static fs::path original() { return *dir_ / "run" / "checkpoints" / "step_4"; }

  // A fresh copy of the trained checkpoint, for one case to alter.
  fs::path copy(const std::string& name) {
    const fs::path to = *dir_ / "cases" / name;
    fs::create_directories(to.parent_path());
    fs::copy(original(), to, fs::copy_options::recursive);
    return to;
  }

  static nlohmann::json state(const fs::path& checkpoint) {
    return nlohmann::json::parse(test::read_text(checkpoint / "state.json"));
  }
  static void put_state(const fs::path& checkpoint, const nlohmann::json& doc) {
    write_text(checkpoint / "state.json", doc.dump(2));
  }
  // Records `name`'s new size and CRC-32 in state.json, as a forger who knows the format would.
  static void reseal(const fs::path& checkpoint, const std::string& name) {
    nlohmann::json doc = state(checkpoint);
    doc["files"][name] = {{"bytes", fs::file_size(checkpoint / name)}, {"crc32", crc32_hex_of_file(checkpoint / name)}};
    put_state(checkpoint, doc);
  }

  // Writes `value` over the first element of the first tensor of `file` whose name starts with `prefix`, and
  // reseals the file.
  static void put_float(const fs::path& checkpoint, const std::string& file, const std::string& prefix, float value) {
    std::string bytes = test::read_text(checkpoint / file);
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    const auto header = nlohmann::json::parse(bytes.substr(8, length));
    for (const auto& [name, entry] : header.items()) {
      if (name.rfind(prefix, 0) != 0) continue;
      std::memcpy(bytes.data() + 8 + length + entry.at("data_offsets")[0].get<std::size_t>(), &value, 4);
      write_text(checkpoint / file, bytes);
      reseal(checkpoint, file);
      return;
    }
    FAIL() << file << " has no tensor named " << prefix << "...";
  }

  // `train --resume` refuses `checkpoint` with `text`, within the bound, and writes no run.
  void expect_resume_refused(const fs::path& checkpoint, const std::string& text) {
    const fs::path out = checkpoint.parent_path() / (checkpoint.filename().string() + "_resumed");
    const auto r = run_loco_within(kBound, {"train", "--resume", checkpoint.string(), "--set", "train.steps=6", "--set",
                                            "train.out_dir=" + out.string()});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out / "checkpoints" / "step_6")) << r.output;
    EXPECT_FALSE(fs::exists(out)) << "a refused run leaves no directory: " << r.output;
  }

  // eval, generate and export each refuse `checkpoint` with `code` and `text`, within the bound, and
  // leave it unchanged.
  void expect_every_reader_refuses(const fs::path& checkpoint, int code, const std::string& text) {
    const std::string before = listing(checkpoint);
    const std::vector<std::vector<std::string>> readers = {
        {"eval", "--checkpoint", checkpoint.string(), "--data", data().string(), "--batches", "2"},
        {"generate", "--checkpoint", checkpoint.string(), "--prompt", "a", "--tokens", "2"},
        {"export", "--checkpoint", checkpoint.string(), "--out", (checkpoint.parent_path() / "export").string()},
        {"train", "--resume", checkpoint.string(), "--set", "train.steps=6", "--set",
         "train.out_dir=" + (checkpoint.parent_path() / "resumed").string()}};
    for (const auto& args : readers) {
      const auto r = run_loco_within(kBound, args);
      EXPECT_EQ(r.exit_code, code) << args[0] << ": " << r.output;
      EXPECT_NE(r.output.find(text), std::string::npos) << args[0] << ": " << r.output;
      EXPECT_EQ(r.output.find("unexpected error"), std::string::npos) << args[0] << ": " << r.output;
    }
    EXPECT_FALSE(fs::exists(checkpoint.parent_path() / "export"));
    EXPECT_EQ(listing(checkpoint), before);
  }

  // Names, sizes and modes of what `dir` holds (symbolic links and FIFOs are not followed).
  static std::string listing(const fs::path& dir) {
    std::string out;
    for (const auto& entry : fs::directory_iterator(dir)) {
      struct stat st {};
      ::lstat(entry.path().c_str(), &st);
      out += fmt::format("{} {} {}\n", entry.path().filename().string(), st.st_mode, st.st_size);
    }
    return out;
  }

  static ScratchDir* dir_;
};
ScratchDir* HostileCheckpoint::dir_ = nullptr;

TEST_F(HostileCheckpoint, AFileListWithoutTheModelDoesNotSkipItsChecksum) {
  const fs::path unlisted = copy("unlisted");
  nlohmann::json doc = state(unlisted);
  doc["files"].erase("model.safetensors");
  put_state(unlisted, doc);
  std::fstream model(unlisted / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  model.seekp(-4, std::ios::end);
  model.write("\x7f\x7f\x7f\x7f", 4);  // a corrupted weight that a skipped checksum would let through
  model.close();
  expect_every_reader_refuses(unlisted, 1, "does not list model.safetensors");

  const fs::path emptied = copy("emptied");
  doc = state(emptied);
  doc["files"] = nlohmann::json::object();
  put_state(emptied, doc);
  expect_every_reader_refuses(emptied, 1, "does not list");

  const fs::path extra = copy("extra");
  doc = state(extra);
  doc["files"]["notes.txt"] = {{"bytes", 0}, {"crc32", "00000000"}};
  put_state(extra, doc);
  expect_every_reader_refuses(extra, 1, "not a file of a loco checkpoint");
}

TEST_F(HostileCheckpoint, FilesThatAreNotRegularAreRefusedBeforeTheyAreOpened) {
  const fs::path fifo = copy("fifo");
  fs::remove(fifo / "state.json");
  ASSERT_EQ(::mkfifo((fifo / "state.json").c_str(), 0644), 0);
  expect_every_reader_refuses(fifo, 1, "FIFO");

  const fs::path zero = copy("zero");
  fs::remove(zero / "state.json");
  fs::create_symlink("/dev/zero", zero / "state.json");
  expect_every_reader_refuses(zero, 1, "device");

  const fs::path model_fifo = copy("model_fifo");
  fs::remove(model_fifo / "model.safetensors");
  ASSERT_EQ(::mkfifo((model_fifo / "model.safetensors").c_str(), 0644), 0);
  expect_every_reader_refuses(model_fifo, 1, "not a regular file");

  const fs::path loop = copy("loop");
  fs::remove(loop / "model.safetensors");
  fs::create_symlink("model.safetensors", loop / "model.safetensors");
  // Named as what took the file's place (before: "missing … copied incompletely", which it was not).
  expect_every_reader_refuses(loop, 1, "cannot be read (Too many levels of symbolic links): a loop of symbolic links");
}

TEST_F(HostileCheckpoint, AnImpossibleModelConfigIsRefusedByEveryReader) {
  // (section, key, value, what the refusal names)
  const std::vector<std::tuple<std::string, std::string, nlohmann::json, std::string>> cases = {
      {"model", "num_attention_heads", 0, "num_attention_heads"},
      {"model", "num_attention_heads", 3, "not divisible"},
      {"model", "vocab_size", 0, "vocab_size"},
      {"model", "hidden_size", -32, "hidden_size"},
      {"model", "num_hidden_layers", 1LL << 40, "num_hidden_layers"},
      {"data", "seq_len", 0, "seq_len"},
      {"train", "micro_batch_size", -1, "micro_batch_size"},
  };
  int count = 0;
  for (const auto& [section, key, value, text] : cases) {
    const fs::path checkpoint = copy(fmt::format("config_{}", ++count));
    nlohmann::json doc = state(checkpoint);
    doc["config"][section][key] = value;
    put_state(checkpoint, doc);
    expect_every_reader_refuses(checkpoint, 1, text);
  }
}

// A Streaming DiLoCo checkpoint holding an exchange in flight, edited: a fragment the run does not have, a
// negative step or weight, a field of the wrong type, negative counts. Refused naming state.json, exit 1 (was an internal
// error, exit 70, an "unexpected error" quoting the JSON library, or accepted).
TEST_F(HostileCheckpoint, AnEditedExchangeInFlightIsRefused) {
  const fs::path streaming = *dir_ / "streaming";
  const auto trained = run_loco({"train", "--config", (*dir_ / "run.toml").string(), "--set",
                                 "train.out_dir=" + streaming.string(), "--set", "dist.algorithm=streaming", "--set",
                                 "dist.replicas=2", "--set", "streaming.sync_every=2", "--set", "streaming.fragments=2",
                                 "--set", "train.checkpoint_every=1", "--set", "train.steps=6"});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& x) { x["fragment"] = 7; }, "holds an exchange of fragment 7, but the run has 2 fragments"},
      {[](nlohmann::json& x) { x["fragment"] = -1; }, "holds an exchange of fragment -1"},
      {[](nlohmann::json& x) { x["apply_after"] = -3; }, "whose apply_after is step -3"},
      {[](nlohmann::json& x) { x["mix"] = "yes"; }, "holds a strategy state that does not read as one"},
      // A negative weight skipped the fragment's outer step as if every replica's contribution was refused.
      {[](nlohmann::json& x) { x["contributed"] = -2.0; }, "whose contributed is -2, below 0"},
      // A weight that reads but is not the other replica's: each would apply another outer step (was accepted).
      {[](nlohmann::json& x) { x["contributed"] = x["contributed"].get<double>() + 0.5; },
       "replica 1 holds another synchronisation schedule than replica 0"},
  };
  // And the fragments' counts: negative outer steps, a negative overlap (the replicas would exchange in other
  // orders: an internal error in a collective before).
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> counts = {
      {[](nlohmann::json& st) { st["outer_steps"][0] = -1; }, "counts -1 outer steps of a fragment"},
      {[](nlohmann::json& st) { st["overlap"][0] = -1; }, "overlaps a fragment's exchange by -1 steps"},
  };
  std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> all = cases;
  all.insert(all.end(), counts.begin(), counts.end());
  int count = 0;
  for (const auto& [edit, text] : all) {
    const fs::path run = *dir_ / fmt::format("streaming_edited_{}", ++count);
    fs::copy(streaming, run, fs::copy_options::recursive);
    for (const fs::path& replica : {run, run / "replica_1"}) {  // step_4 is the run's latest
      for (const char* later : {"step_5", "step_6"}) fs::remove_all(replica / "checkpoints" / later);
    }
    const fs::path checkpoint = run / "checkpoints" / "step_4";
    nlohmann::json doc = state(checkpoint);
    ASSERT_FALSE(doc.at("strategy").at("in_flight").empty()) << doc.dump();
    if (count <= static_cast<int>(cases.size())) {
      edit(doc["strategy"]["in_flight"][0]);
    } else {
      edit(doc["strategy"]);
    }
    put_state(checkpoint, doc);
    const auto r = run_loco_within(kBound, {"train", "--resume", checkpoint.string(), "--set", "train.steps=8", "--set",
                                            "train.out_dir=" + run.string()});
    EXPECT_EQ(r.exit_code, 1) << text << ": " << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("unexpected error"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(run / "checkpoints" / "step_5")) << r.output;
  }
}

TEST_F(HostileCheckpoint, NegativeCountsAreRefused) {
  int count = 0;
  for (const char* key : {"step", "tokens", "optimizer_steps", "elapsed_s"}) {
    const fs::path checkpoint = copy(fmt::format("negative_{}", ++count));
    nlohmann::json doc = state(checkpoint);
    doc[key] = -5;
    put_state(checkpoint, doc);
    const auto r = run_loco_within(kBound, {"eval", "--checkpoint", checkpoint.string(), "--data", data().string()});
    EXPECT_EQ(r.exit_code, 1) << key << ": " << r.output;
    EXPECT_NE(r.output.find(fmt::format("field '{}'", key)), std::string::npos) << r.output;
  }
}

// Counts so large that the run's next steps would overflow them, and communication totals that cannot be
// (the run adds to them at its first log line, after training started).
TEST_F(HostileCheckpoint, CountsBeyondAnyRunAndImpossibleTotalsAreRefused) {
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"tokens", std::numeric_limits<std::int64_t>::max(), "field 'tokens' must be a count from 0 to"},
      {"step", std::int64_t{1} << 41, "field 'step' must be a count from 0 to"},
      {"optimizer_steps", std::numeric_limits<std::int64_t>::max(), "field 'optimizer_steps'"},
      {"communication", {{"sim_wall_s", -5}}, "field 'sim_wall_s' must be a number of seconds"},
      {"communication", {{"comm_s", "soon"}}, "field 'comm_s'"},
      {"communication", {{"bytes_sent", -1}}, "field 'bytes_sent'"},
      {"communication", 7, "field 'communication' must be an object"},
  };
  int count = 0;
  for (const auto& [key, value, text] : cases) {
    const fs::path checkpoint = copy(fmt::format("beyond_{}", ++count));
    nlohmann::json doc = state(checkpoint);
    doc[key] = value;
    put_state(checkpoint, doc);
    expect_resume_refused(checkpoint, text);
  }
}

// Moments of the optimizer that would train into NaN at once (and be written into the next checkpoint).
TEST_F(HostileCheckpoint, NonFiniteOrNegativeOptimizerMomentsAreRefusedOnResume) {
  const fs::path nan = copy("moment_nan");
  put_float(nan, "optimizer.safetensors", "exp_avg/", std::nanf(""));
  expect_resume_refused(nan, "holds values that are not finite numbers");
  const fs::path negative = copy("moment_negative");
  put_float(negative, "optimizer.safetensors", "exp_avg_sq/", -1.0f);
  expect_resume_refused(negative, "holds values that are not finite numbers of 0 or more");
}

// Two replicas resumed in their own directory, replica 0's part of the checkpoint tampered with (its outer
// parameters NaN): replica 1, whose part is sound, must neither train a step nor write into the run (before,
// it wrote its config and a step's metrics there while replica 0 refused).
TEST_F(HostileCheckpoint, AReplicaThatRefusesItsPartStopsTheOthersBeforeTheyWrite) {
  const fs::path run = *dir_ / "two_replicas";
  const auto trained = run_loco({"train", "--config", (*dir_ / "run.toml").string(), "--set", "dist.algorithm=diloco",
                                 "--set", "dist.replicas=2", "--set", "diloco.sync_every=2", "--set",
                                 "train.out_dir=" + run.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path checkpoint = run / "checkpoints" / "step_4";
  put_float(checkpoint, "strategy.safetensors", "outer/global", std::nanf(""));
  const std::string config = test::read_text(run / "replica_1" / "config.toml");
  const std::string metrics = test::read_text(run / "replica_1" / "metrics.jsonl");
  const auto r = run_loco_within(kBound, {"train", "--resume", checkpoint.string(), "--set", "train.steps=8", "--set",
                                          "optim.lr=0.5"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("values that are not finite"), std::string::npos) << r.output;
  EXPECT_EQ(test::read_text(run / "replica_1" / "config.toml"), config) << r.output;
  EXPECT_EQ(test::read_text(run / "replica_1" / "metrics.jsonl"), metrics) << r.output;
  EXPECT_FALSE(fs::exists(run / "replica_1" / "checkpoints" / "step_8")) << r.output;
}

// A replica's part of a checkpoint put in another's place, or taken from another run, whose checksums all hold:
// replica 0's part copied over replica 1's (its state.json says whose it is), or replica 1's part from a run
// trained with another learning rate (its outer global parameters differ from replica 0's, which one run's
// never do). Before, both resumed without a word, replica 1 from weights and optimizer state that were not its.
TEST_F(HostileCheckpoint, AReplicasPartInAnothersPlaceOrFromAnotherRunIsRefused) {
  const auto train_two = [&](const fs::path& run, const std::string& lr) {
    const auto trained = run_loco({"train", "--config", (*dir_ / "run.toml").string(), "--set", "dist.algorithm=diloco",
                                   "--set", "dist.replicas=2", "--set", "diloco.sync_every=2", "--set",
                                   "optim.lr=" + lr, "--set", "train.out_dir=" + run.string()});
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
  };
  const fs::path a = *dir_ / "parts_a", b = *dir_ / "parts_b";
  train_two(a, "0.003");
  train_two(b, "0.01");
  const fs::path a_part = a / "replica_1" / "checkpoints" / "step_4";
  fs::remove_all(a_part);
  fs::copy(a / "checkpoints" / "step_4", a_part, fs::copy_options::recursive);
  auto r =
      run_loco_within(kBound, {"train", "--resume", (a / "checkpoints" / "step_4").string(), "--set", "train.steps=6"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is the part of replica 0 (its state.json says so), but it sits where the part of replica 1 "
                          "belongs"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(a / "checkpoints" / "step_6")) << r.output;

  fs::remove_all(a_part);
  fs::copy(b / "replica_1" / "checkpoints" / "step_4", a_part, fs::copy_options::recursive);
  r = run_loco_within(kBound, {"train", "--resume", (a / "checkpoints" / "step_4").string(), "--set", "train.steps=6"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("holds another set of outer global parameters than replica 0"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(a / "checkpoints" / "step_6")) << r.output;
}

// A config in state.json with fewer layers, or a tied head, than the weights hold: the extra tensors would
// be dropped silently, and a different model evaluated or trained on.
TEST_F(HostileCheckpoint, WeightsTheConfigHasNoPlaceForAreRefused) {
  const fs::path fewer = copy("fewer_layers");
  nlohmann::json doc = state(fewer);
  doc["config"]["model"]["num_hidden_layers"] = 1;
  put_state(fewer, doc);
  expect_every_reader_refuses(fewer, 1, "model.layers.1.");
  const fs::path tied = copy("tied");
  doc = state(tied);
  doc["config"]["model"]["tie_word_embeddings"] = true;
  put_state(tied, doc);
  expect_every_reader_refuses(tied, 1, "holds lm_head.weight, which the model");
}

// The header's dtype of the first tensor says I32 where the bytes are float32; then a NaN in the data.
TEST_F(HostileCheckpoint, RelabelledOrNonFiniteWeightsAreRefused) {
  const fs::path relabelled = copy("relabelled");
  std::string bytes = test::read_text(relabelled / "model.safetensors");
  const auto at = bytes.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "\"I32\"");
  write_text(relabelled / "model.safetensors", bytes);
  reseal(relabelled, "model.safetensors");
  expect_every_reader_refuses(relabelled, 1, "as Int but the model's parameters are Float");

  const fs::path nan = copy("nan");
  bytes = test::read_text(nan / "model.safetensors");
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const float not_a_number = std::nanf("");
  std::memcpy(bytes.data() + 8 + header, &not_a_number, 4);
  write_text(nan / "model.safetensors", bytes);
  reseal(nan, "model.safetensors");
  expect_every_reader_refuses(nan, 1, "not finite");
}

TEST_F(HostileCheckpoint, AVocabularyEditedInMetaJsonIsRefusedByEval) {
  const fs::path edited = *dir_ / "cases" / "meta_edited";
  fs::create_directories(edited.parent_path());
  fs::copy(data(), edited, fs::copy_options::recursive);
  nlohmann::json meta = nlohmann::json::parse(test::read_text(edited / "meta.json"));
  meta["vocab_size"] = 100000;
  write_text(edited / "meta.json", meta.dump());
  const auto r = run_loco_within(kBound, {"eval", "--checkpoint", original().string(), "--data", edited.string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("embeds only"), std::string::npos) << r.output;
}

// The data directory's tokenizer is copied into every checkpoint: a run whose tokenizer files were removed,
// replaced or disagree with meta.json is refused before its first step, not after training (when no checkpoint
// could be written), and writes nothing; so is one whose validation windows hold ids beyond the vocabulary.
TEST_F(HostileCheckpoint, ADataDirectoryWhoseTokenizerWasAlteredIsRefusedBeforeTraining) {
  const auto altered = [&](const std::string& name, const std::function<void(const fs::path&)>& alter) {
    const fs::path copy_of_data = *dir_ / "cases" / name;
    fs::create_directories(copy_of_data.parent_path());
    fs::copy(data(), copy_of_data, fs::copy_options::recursive);
    alter(copy_of_data);
    return copy_of_data;
  };
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {altered("no_tokenizer", [](const fs::path& d) { fs::remove(d / "tokenizer.json"); }), "tokenizer.json"},
      {altered("vocab_edited",
               [](const fs::path& d) {
                 nlohmann::json meta = nlohmann::json::parse(test::read_text(d / "meta.json"));
                 meta["vocab_size"] = 100000;
                 write_text(d / "meta.json", meta.dump());
               }),
       "it has 258 tokens, meta.json's vocab_size is 100000"},
      {altered("tokenizer_edited",
               [](const fs::path& d) {
                 nlohmann::json meta = nlohmann::json::parse(test::read_text(d / "meta.json"));
                 meta["tokenizer"]["kind"] = "sentencepiece-bpe";
                 write_text(d / "meta.json", meta.dump());
               }),
       "is not the one its tokens were encoded with"},
      // Every validation token 60000 (uint16), the CRC in meta.json recomputed: before, the run trained every
      // step and failed at its final evaluation, with no checkpoint written.
      {altered("val_ids_beyond_vocabulary",
               [](const fs::path& d) {
                 std::string bytes = test::read_text(d / "val_000.bin");
                 for (std::size_t i = 32; i + 1 < bytes.size(); i += 2) {
                   bytes[i] = static_cast<char>(60000 & 0xff);
                   bytes[i + 1] = static_cast<char>(60000 >> 8);
                 }
                 write_text(d / "val_000.bin", bytes);
                 nlohmann::json meta = nlohmann::json::parse(test::read_text(d / "meta.json"));
                 meta["checksums"]["val_000.bin"] = crc32_hex_of_file(d / "val_000.bin");
                 write_text(d / "meta.json", meta.dump());
               }),
       "is 60000, outside the vocabulary of 258"},
  };
  for (const auto& [altered_data, text] : cases) {
    const fs::path out = altered_data.string() + "_run";
    const auto r = run_loco_within(kBound, {"train", "--config", (*dir_ / "run.toml").string(), "--set",
                                            "data.dir=" + altered_data.string(), "--set", "train.out_dir=" + out.string()});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out)) << r.output;
  }
}

// A model whose embedding is larger than its tokenizer's vocabulary (model.vocab_size above the data's)
// generates only ids the tokenizer can decode, however flat the sampling.
TEST_F(HostileCheckpoint, GenerationDrawsOnlyIdsTheTokenizerDecodes) {
  const fs::path out = *dir_ / "cases" / "wide_vocabulary";
  const auto trained = run_loco({"train", "--config", (*dir_ / "run.toml").string(), "--set", "model.vocab_size=300",
                                 "--set", "train.steps=1", "--set", "train.out_dir=" + out.string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto r = run_loco_within(kBound, {"generate", "--checkpoint", (out / "checkpoints" / "step_1").string(),
                                          "--prompt", "the", "--tokens", "400", "--temperature", "100", "--top-k", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A batch no machine holds: the allocator's refusal in words, with what to lower, not libtorch's backtrace.
// A batch whose estimated need (note "memory-need") is within what the process's 8 GiB leave beside what it maps
// already (~7 GiB) but whose real one is not:
// the allocation that fails is an error saying what to lower (it takes ~20 s of training to get there).
TEST_F(HostileCheckpoint, RunningOutOfMemoryIsAnErrorThatSaysWhatToLower) {
  const auto r = test::run_loco_in_memory(3 * kBound, 8u << 20,
                                          {"train", "--config", (*dir_ / "run.toml").string(), "--set",
                                           "train.batch_size=85000", "--set",
                                           "train.out_dir=" + (*dir_ / "cases" / "oom").string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("loco: error: out of memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Lower train.batch_size"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
}

// A model or batch beyond the process's memory is refused at start-up (before: it was accepted, and grew until
// the kernel killed it), and nothing of the run is written.
TEST_F(HostileCheckpoint, ARunBeyondTheMachinesMemoryIsRefusedAtOnce) {
  for (const std::string set : {"train.batch_size=100000000", "model.num_hidden_layers=100000000"}) {
    const fs::path out = *dir_ / "cases" / "beyond";
    const auto r = test::run_loco_in_memory(kBound, 8u << 20,
                                            {"train", "--config", (*dir_ / "run.toml").string(), "--set", set, "--set",
                                             "train.out_dir=" + out.string()});
    EXPECT_EQ(r.exit_code, 2) << set << ": " << r.output;
    EXPECT_NE(r.output.find("GiB available to this process"), std::string::npos) << set << ": " << r.output;
    EXPECT_FALSE(fs::exists(out)) << set;
  }
}

TEST_F(HostileCheckpoint, ExtremeEvalAndGenerateOptionsGiveNumbers) {
  auto r = run_loco_within(kBound, {"eval", "--checkpoint", original().string(), "--data", data().string(), "--batches",
                                    "9223372036854775807"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto line = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_TRUE(line["loss"].is_number()) << r.output;
  EXPECT_GT(line["tokens"].get<std::int64_t>(), 0) << r.output;

  r = run_loco_within(kBound, {"generate", "--checkpoint", original().string(), "--prompt", "the", "--tokens", "5",
                               "--temperature", "1e-300"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Note "own-directories": a run is never written into a prepared data directory or a checkpoint.
TEST_F(HostileCheckpoint, ARunIsNotWrittenIntoDataOrACheckpoint) {
  const std::string data_before = listing(data());
  const std::string checkpoint_before = listing(original());
  const std::vector<std::pair<fs::path, std::string>> targets = {
      {data(), "is a prepared data directory"},
      {data() / "run", "is inside a prepared data directory"},
      {original(), "is a checkpoint"},
      {original() / "deeper" / "run", "is inside a checkpoint"},
  };
  for (const auto& [out_dir, text] : targets) {
    const auto r = run_loco_within(
        kBound, {"train", "--config", (*dir_ / "run.toml").string(), "--set", "train.out_dir=" + out_dir.string()});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
  }
  const auto exported =
      run_loco_within(kBound, {"export", "--checkpoint", original().string(), "--out", (data() / "hf").string()});
  EXPECT_EQ(exported.exit_code, 2) << exported.output;
  // Nor into the run's checkpoints directory, where an export named like a later checkpoint was taken for one.
  const fs::path later = original().parent_path() / "step_999999";
  const auto beside = run_loco_within(kBound, {"export", "--checkpoint", original().string(), "--out", later.string()});
  EXPECT_EQ(beside.exit_code, 2) << beside.output;
  EXPECT_NE(beside.output.find("is in the checkpoints directory of the run in"), std::string::npos) << beside.output;
  EXPECT_FALSE(fs::exists(later));
  // Nor a training run into that checkpoints directory itself (it was taken: its config.toml, metrics.jsonl
  // and checkpoints/ landed among the other run's checkpoints).
  const auto into = run_loco_within(kBound, {"train", "--config", (*dir_ / "run.toml").string(), "--set",
                                             "train.out_dir=" + original().parent_path().string()});
  EXPECT_EQ(into.exit_code, 2) << into.output;
  EXPECT_NE(into.output.find("is the checkpoints directory of the run in"), std::string::npos) << into.output;
  EXPECT_FALSE(fs::exists(original().parent_path() / "config.toml"));
  EXPECT_EQ(listing(data()), data_before);
  EXPECT_EQ(listing(original()), checkpoint_before);
}

// A directory named like a checkpoint without its state.json (a copy cut short) passed for one: a resume from
// an earlier checkpoint was told to resume from it, and a fresh run was pointed at it. A replica's part of a
// checkpoint whose other parts are missing (a run killed while its replicas wrote their first) sent a fresh
// run to resume from a checkpoint that does not exist; named as a --resume, it was mapped to its replica twice.
TEST_F(HostileCheckpoint, CheckpointsThatAreNotWholeAreNamedWithAFixThatWorks) {
  const fs::path run = *dir_ / "cases" / "cut-copy";
  fs::create_directories(run / "checkpoints");
  fs::copy(original().parent_path().parent_path() / "config.toml", run / "config.toml");
  fs::copy(original(), run / "checkpoints" / "step_4", fs::copy_options::recursive);
  fs::create_directories(run / "checkpoints" / "step_6");
  const std::vector<std::string> longer = {"--set", "train.steps=8", "--set", "train.out_dir=" + run.string()};
  std::vector<std::string> resume = {"train", "--resume", (run / "checkpoints" / "step_4").string()};
  resume.insert(resume.end(), longer.begin(), longer.end());
  auto r = run_loco_within(kBound, resume);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((run / "checkpoints" / "step_6").string() +
                          " is named like a checkpoint but holds no state.json"),
            std::string::npos)
      << r.output;
  fs::remove(run / "checkpoints" / "step_6");
  // A checkpoint's temporary directory named as one: a run resumed from it removed it as a stopped write's.
  const fs::path partial = run / "checkpoints" / ".step_4.partial-99999";
  fs::copy(run / "checkpoints" / "step_4", partial, fs::copy_options::recursive);
  std::vector<std::string> from_partial = {"train", "--resume", partial.string()};
  from_partial.insert(from_partial.end(), longer.begin(), longer.end());
  r = run_loco_within(kBound, from_partial);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is a checkpoint being written, or left by a write that was stopped"), std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::exists(partial / "state.json"));
  r = run_loco_within(kBound, resume);
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // Replica 1's part of step 2 alone, beside a first replica that has no checkpoint: what a two-replica run
  // killed while its replicas wrote their first checkpoint leaves.
  const fs::path parts = *dir_ / "cases" / "one-part";
  const std::vector<std::string> two = {"--set", "dist.replicas=2",      "--set", "dist.algorithm=diloco",
                                        "--set", "dist.batch=per_replica", "--set", "diloco.sync_every=2",
                                        "--set", "train.out_dir=" + parts.string()};
  std::vector<std::string> fresh = {"train", "--config", (*dir_ / "run.toml").string(), "--set", "train.steps=2"};
  fresh.insert(fresh.end(), two.begin(), two.end());
  r = run_loco_within(kBound, fresh);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::error_code ignored;
  remove_tree(parts / "checkpoints", ignored);
  fs::remove(parts / "metrics.jsonl");
  fs::remove(parts / "replica_1" / "metrics.jsonl");
  r = run_loco_within(kBound, fresh);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("a part of a checkpoint whose other parts are missing"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Remove " + (parts / "replica_1" / "checkpoints").string()), std::string::npos) << r.output;
  std::vector<std::string> part_resume = {"train", "--resume",
                                          (parts / "replica_1" / "checkpoints" / "step_2").string()};
  part_resume.insert(part_resume.end(), two.begin(), two.end());
  r = run_loco_within(kBound, part_resume);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is the part of one replica or stage (replica_1) of a checkpoint; --resume names the run's "
                          "own, " + (parts / "checkpoints" / "step_2").string()),
            std::string::npos)
      << r.output;
}

// Resuming one run's checkpoint into the directory of another that has checkpoints mixed the two (its
// config.toml replaced, its metrics continued with the other's, a later checkpoint of the other run among its
// own) and neither could be resumed again: refused, nothing written.
TEST_F(HostileCheckpoint, AResumeIntoAnotherRunsDirectoryIsRefused) {
  const fs::path other = *dir_ / "cases" / "other-run";
  auto r = run_loco_within(kBound, {"train", "--config", (*dir_ / "run.toml").string(), "--set", "train.steps=2",
                                    "--set", "train.seed=7", "--set", "train.out_dir=" + other.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string config_before = test::read_text(other / "config.toml");
  const std::string metrics_before = test::read_text(other / "metrics.jsonl");
  r = run_loco_within(kBound, {"train", "--resume", original().string(), "--set", "train.steps=8", "--set",
                               "train.out_dir=" + other.string()});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("holds the checkpoints of another run (the latest " +
                          (other / "checkpoints" / "step_2").string() + "), and " + original().string() +
                          " is not one of them"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(test::read_text(other / "config.toml"), config_before);
  EXPECT_EQ(test::read_text(other / "metrics.jsonl"), metrics_before);
  EXPECT_FALSE(fs::exists(other / "checkpoints" / "step_8"));
}

TEST_F(HostileCheckpoint, PathsTheSystemRefusesAreNamedNotThrown) {
  fs::create_symlink("loop_b", *dir_ / "loop_a");
  fs::create_symlink("loop_a", *dir_ / "loop_b");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"eval", "--checkpoint", (*dir_ / "loop_a").string(), "--data", data().string()},
           {"train", "--config", (*dir_ / "run.toml").string(), "--set", "data.dir=" + (*dir_ / "loop_a").string()},
           {"train", "--config", (*dir_ / "run.toml").string(), "--set",
            "train.out_dir=" + (*dir_ / "loop_a" / "run").string()}}) {
    const auto r = run_loco_within(kBound, args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("loop_a"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("unexpected error"), std::string::npos) << r.output;
  }
  // A path of 16,000 bytes (through a config file: one argument may not be that long; a config's lines are at
  // most 16 KiB, and a 2 MB path is refused as a line too long) is named by its two ends.
  std::string config = test::read_text(*dir_ / "run.toml");
  const std::string long_dir = std::string(16'000, 'a');
  config.replace(config.find("dir = \""), 7 + data().string().size() + 1, "dir = \"" + long_dir + "\"");
  write_text(*dir_ / "long.toml", config);
  const auto r = run_loco_within(kBound, {"train", "--config", (*dir_ / "long.toml").string()});
  const auto error = r.output.rfind("loco: ");
  ASSERT_NE(error, std::string::npos) << r.output.substr(0, 2000);
  const std::string message = r.output.substr(error);
  EXPECT_EQ(r.exit_code, 1) << message.substr(0, 2000);
  EXPECT_NE(message.find("characters)..."), std::string::npos) << message.substr(0, 2000);
  EXPECT_EQ(message.find("unexpected error"), std::string::npos) << message.substr(0, 2000);
  EXPECT_LT(message.size(), 2'000u);
}

}  // namespace
}  // namespace loco
