#include "loco/data/dataset_meta.h"

#include <fmt/format.h>

#include "loco/data/json_file.h"
#include "loco/data/loco_made.h"
#include "loco/data/prepare.h"
#include "loco/data/tokenizer.h"
#include "loco/util/directory_lock.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_integer.h"

namespace loco::data {

namespace {

constexpr const char* kFormat = "loco-tokens";
constexpr int kVersion = 1;

nlohmann::json split_to_json(const SplitMeta& split) {
  return {{"shards", split.shards}, {"tokens", split.tokens}, {"documents", split.documents}};
}

SplitMeta split_from_json(const nlohmann::json& j) {
  return SplitMeta{j.at("shards").get<std::vector<std::string>>(), json_integer<std::uint64_t>(j.at("tokens")),
                   json_integer<std::uint64_t>(j.at("documents"))};
}

// Whether `dir` holds files but none that loco writes (a data directory's, which may have lost some, or a
// run's): a corpus given where its prepared data belongs.
bool looks_like_a_corpus(const fs::path& dir) {
  std::error_code unreadable;
  if (!fs::is_directory(dir, unreadable) || fs::is_empty(dir, unreadable)) return false;
  for (const char* written : {"meta.json", "tokenizer.json", "tokenizer.model", "train_000.bin", "val_000.bin",
                              "config.toml", "metrics.jsonl", "state.json", "checkpoints"}) {
    if (fs::exists(dir / written, unreadable)) return false;
  }
  return true;
}

}  // namespace

const SplitMeta& DatasetMeta::split(const std::string& name) const {
  if (name == "train") return train;
  if (name == "val") return val;
  throw DataError(fmt::format("unknown data split '{}'; the splits are 'train' and 'val'.", name));
}

nlohmann::json DatasetMeta::to_json() const {
  return {{"format", kFormat},
          {"version", kVersion},
          {"tokenizer", tokenizer},
          {"tokenizer_hash", tokenizer_hash},
          {"vocab_size", vocab_size},
          {"bytes_per_token", bytes_per_token},
          {"train", split_to_json(train)},
          {"val", split_to_json(val)},
          {"sources", sources},
          {"val_fraction", val_fraction},
          {"seed", seed},
          {"checksums", checksums}};
}

DatasetMeta read_dataset_meta(const fs::path& data_dir) {
  fs::path path = data_dir / kMetaFileName;
  std::error_code unreadable;
  // The fix `loco prepare --out DATA_DIR` is no fix where prepare refuses that --out: a checkpoint, a file.
  const char* made = loco_made(data_dir);
  const std::string fix =
      made == kCheckpointDirectory
          ? fmt::format(
                "{} is a checkpoint, not a prepared data directory: give the directory `loco prepare` wrote "
                "(data.dir in the checkpoint's state.json, or in its run's config.toml, names it).",
                data_dir.string())
      : fs::exists(data_dir, unreadable) && !fs::is_directory(data_dir, unreadable)
          ? fmt::format("{} is not a directory: give the directory `loco prepare` wrote.", data_dir.string())
      // Before: "run `loco prepare … --out` here", which would race the prepare that is writing it. Asked only
      // where meta.json is missing: data that can be read take no lock.
      : !fs::exists(path, unreadable) && DirectoryLock::held(data_dir)
          ? fmt::format(
                "{} is being prepared right now (a loco process holds it and has not written its "
                "meta.json yet): wait for that `loco prepare` to finish, then run this again.",
                data_dir.string())
      // What `loco export` writes: weights and a Hugging Face tokenizer, no data (prepare refuses it as --out).
      : made == nullptr && fs::exists(data_dir / "config.json", unreadable) &&
              fs::exists(data_dir / "model.safetensors", unreadable)
          ? fmt::format(
                "{} is a Hugging Face export (as `loco export` writes), not a prepared data directory: give "
                "the directory `loco prepare` wrote (data.dir in the config of the run it was exported from)",
                data_dir.string())
      // A directory of files loco did not write is a corpus, mostly, which prepare refuses as its own --out.
      : made == nullptr && looks_like_a_corpus(data_dir)
          ? fmt::format(
                "{} is no prepared data directory (loco did not write it: a corpus?): prepare it with `loco "
                "prepare --input {} --out {}-prepared` and point data at that.",
                data_dir.string(), data_dir.string(), without_trailing_separator(data_dir).string())
          : fmt::format(
                "{} is not a complete prepared data directory: run `loco prepare --input CORPUS --out {}` "
                "(into a new or emptied directory) and point data at it.",
                data_dir.string(), data_dir.string());
  nlohmann::json j = read_json_file(path, fix);
  return read_json_fields(path, fix, [&] {
    if (j.at("format") != kFormat || j.at("version") != kVersion) {
      throw malformed_json_file(path,
                                fmt::format("format {} version {}, expected {} version {}", j.at("format").dump(),
                                            j.at("version").dump(), kFormat, kVersion),
                                fix);
    }
    DatasetMeta meta;
    meta.tokenizer = j.at("tokenizer");
    meta.tokenizer_hash = j.value("tokenizer_hash", std::string());
    meta.vocab_size = json_integer<std::uint32_t>(j.at("vocab_size"));
    if (meta.vocab_size == 0) throw malformed_json_file(path, "vocab_size 0: a vocabulary has tokens", fix);
    meta.bytes_per_token = json_integer<std::uint32_t>(j.at("bytes_per_token"));
    meta.train = split_from_json(j.at("train"));
    meta.val = split_from_json(j.at("val"));
    meta.sources = j.at("sources").get<std::vector<std::string>>();
    meta.val_fraction = j.at("val_fraction").get<double>();
    meta.seed = json_integer<std::uint64_t>(j.at("seed"));
    meta.checksums = j.at("checksums").get<std::map<std::string, std::string>>();
    return meta;
  });
}

std::string prepared_tokenizer_hash(const fs::path& data_dir) {
  return prepared_tokenizer_hash(data_dir, read_dataset_meta(data_dir));
}

std::string prepared_tokenizer_hash(const fs::path& data_dir, const DatasetMeta& meta) {
  return meta.tokenizer_hash.empty() ? tokenizer_hash(data_dir) : meta.tokenizer_hash;
}

void require_prepared_tokenizer(const fs::path& data_dir, const DatasetMeta& meta) {
  const auto differs = [&](const std::string& what) {
    return DataError(fmt::format("the tokenizer in {} is not the one its tokens were encoded with ({}): its files "
                                 "were replaced or edited after `loco prepare`. Copy them back from where the data "
                                 "were prepared, or prepare the data again",
                                 data_dir.string(), what));
  };
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(data_dir);  // readable, or its own DataError
  const nlohmann::json files = read_tokenizer_info(data_dir).to_json();
  if (files != meta.tokenizer) {
    throw differs(fmt::format("tokenizer.json says {}, meta.json recorded {}", files.dump(), meta.tokenizer.dump()));
  }
  if (!meta.tokenizer_hash.empty()) {
    const std::string hash = tokenizer_hash(data_dir);
    if (hash != meta.tokenizer_hash) {
      throw differs(fmt::format("its files hash to {}, meta.json recorded {}", hash, meta.tokenizer_hash));
    }
  }
  if (tokenizer->vocab_size() != meta.vocab_size) {
    throw differs(fmt::format("it has {} tokens, meta.json's vocab_size is {}", tokenizer->vocab_size(),
                              meta.vocab_size));
  }
}

void write_dataset_meta(const fs::path& data_dir, const DatasetMeta& meta) {
  // A path is bytes, and JSON holds UTF-8: an input named in another encoding is recorded with U+FFFD for what is
  // not UTF-8 (it failed the whole prepare, at its end, with the JSON library's message).
  write_file_atomic(data_dir / kMetaFileName,
                    meta.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::int64_t model_vocabulary(std::int64_t configured, std::uint32_t data_vocab, const std::string& data_dir) {
  if (configured == 0) return data_vocab;
  if (configured >= static_cast<std::int64_t>(data_vocab)) return configured;
  // The data a model of this size could read: a BPE vocabulary of its size, or bytes (258 ids), where it holds
  // them; a BPE vocabulary has at least kFewestBpeTokens (before: --vocab-size 100 was suggested, which
  // prepare refuses).
  const std::string prepare = configured >= static_cast<std::int64_t>(kFewestBpeTokens)
                                  ? fmt::format(", or prepare the data with --vocab-size {}", configured)
                              : configured >= 258 ? ", or prepare the data with --tokenizer byte"
                                                  : "";
  throw ConfigError(
      fmt::format("vocabulary mismatch: the data in {} uses {} token ids but model.vocab_size is {}. Set "
                  "model.vocab_size = 0 to take the data's vocabulary{}",
                  data_dir, data_vocab, configured, prepare));
}

}  // namespace loco::data
