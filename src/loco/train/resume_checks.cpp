#include "loco/train/resume_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "loco/comm/group.h"
#include "loco/config/load_config.h"
#include "loco/data/dataset_meta.h"
#include "loco/data/tokenizer.h"
#include "loco/pipeline/partition.h"
#include "loco/train/checkpoint.h"
#include "loco/train/checkpoint_state.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace fs = std::filesystem;

void require_same_model(const RunConfig& run, const LoadedCheckpoint& checkpoint) {
  const auto a = to_json(run).at("model");
  const auto b = to_json(checkpoint.config).at("model");
  for (const auto& [key, value] : b.items()) {
    if (a.at(key) != value) {
      throw ConfigError(fmt::format(
          "model.{} is {} in this run's config (from --config or --set) but {} in checkpoint {}; a run resumes with "
          "the model it was started with. Leave it to the checkpoint: resume without --config (the checkpoint's "
          "config is used) and without --set model.{}, or with model.{} = {}",
          key, a.at(key).dump(), value.dump(), checkpoint.dir.string(), key, key, value.dump()));
    }
  }
  // Each stage's checkpoint holds its part of the model: the split must be the one it was saved with, however
  // written ("balanced" and the list of the layers it gives are one split).
  const RunConfig& saved = checkpoint.config;
  const auto split = [&](const RunConfig& config) {
    return pipeline::model_partition(config.model, static_cast<int>(config.dist.stages), config.pipeline.partition);
  };
  if (run.dist.stages != saved.dist.stages || (saved.dist.stages > 1 && split(run) != split(saved))) {
    throw ConfigError(fmt::format(
        "checkpoint {} was written by {} pipeline stage(s) (pipeline.partition \"{}\"), but this run has "
        "dist.stages = {} (\"{}\"): each stage's checkpoint holds its part of the model. Resume with the "
        "checkpoint's dist.stages and pipeline.partition",
        checkpoint.dir.string(), saved.dist.stages, saved.pipeline.partition, run.dist.stages,
        run.pipeline.partition));
  }
}

void require_same_tokenizer(const fs::path& data_dir, const LoadedCheckpoint& checkpoint) {
  const data::DatasetMeta meta = data::read_dataset_meta(data_dir);  // read once for both checks
  const std::string data = data::prepared_tokenizer_hash(data_dir, meta);
  const std::string model = data::tokenizer_hash(checkpoint.dir);
  if (data != model) {
    throw DataError(fmt::format(
        "{} was prepared with another tokenizer ({}) than the model in {} was trained with ({}): the same token ids "
        "would stand for other text. Prepare the data with the model's tokenizer: loco prepare --tokenizer-from {} "
        "--input CORPUS --out NEW_DIR",
        data_dir.string(), data, checkpoint.dir.string(), model, checkpoint.dir.string()));
  }
  // The same tokenizer with a vocabulary beyond the model's: meta.json was edited, or the model's config.
  const std::uint32_t data_vocab = meta.vocab_size;
  if (static_cast<std::int64_t>(data_vocab) > checkpoint.config.model.vocab_size) {
    throw DataError(fmt::format("{} holds token ids up to {} (meta.json) but the model in {} embeds only {}: one of "
                                "the two was edited. Prepare the data again, or use the checkpoint it was "
                                "trained with",
                                data_dir.string(), data_vocab - 1, checkpoint.dir.string(),
                                checkpoint.config.model.vocab_size));
  }
}

void require_same_data_stream(const RunConfig& run, const LoadedCheckpoint& checkpoint) {
  const RunConfig& saved = checkpoint.config;
  const std::pair<const char*, std::pair<std::string, std::string>> choices[] = {
      {"dist.algorithm", {run.dist.algorithm, saved.dist.algorithm}},
      {"dist.batch", {run.dist.batch, saved.dist.batch}},
  };
  for (const auto& [key, values] : choices) {
    if (values.first != values.second) {
      throw ConfigError(fmt::format("{} is \"{}\" but checkpoint {} was trained with \"{}\"; a run resumes with the "
                                    "algorithm and batch layout it was started with (or start a new run from the "
                                    "exported weights)",
                                    key, values.first, checkpoint.dir.string(), values.second));
    }
  }
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> keys[] = {
      {"train.seed", {run.train.seed, saved.train.seed}},
      {"data.seq_len", {run.data.seq_len, saved.data.seq_len}},
      {"train.batch_size", {run.train.batch_size, saved.train.batch_size}},
      {"dist.replicas", {run.dist.replicas, saved.dist.replicas}},
  };
  for (const auto& [key, values] : keys) {
    if (values.first != values.second) {
      throw ConfigError(fmt::format("{} is {} but checkpoint {} was trained with {}; resuming continues the same "
                                    "data stream, so keep {} = {} (or start a new run from the exported weights)",
                                    key, values.first, checkpoint.dir.string(), values.second, key, values.second));
    }
  }
}

void require_same_fragments(const RunConfig& run, const LoadedCheckpoint& checkpoint) {
  const StreamingConfig &now = run.streaming, &saved = checkpoint.config.streaming;
  if (run.dist.algorithm != "streaming") return;
  const std::pair<const char*, std::pair<std::string, std::string>> keys[] = {
      {"streaming.fragments", {std::to_string(now.fragments), std::to_string(saved.fragments)}},
      {"streaming.assignment", {now.assignment, saved.assignment}},
      {"streaming.embeddings_fragment",
       {now.embeddings_fragment ? "true" : "false", saved.embeddings_fragment ? "true" : "false"}},
  };
  for (const auto& [key, values] : keys) {
    if (values.first != values.second) {
      throw ConfigError(fmt::format("{} is {} but checkpoint {} was trained with {}; its outer state is saved per "
                                    "fragment, so resume with {} = {} (or start a new run from the exported weights)",
                                    key, values.first, checkpoint.dir.string(), values.second, key, values.second));
    }
  }
}

namespace {

// The CRC-32s of the outer global parameters a strategy's state holds ("outer/global", "outer/P/global"), which
// every replica of one run holds alike (DiLoCo, Streaming, Local SGD; NoLoCo has none): a replica's part from
// another run held others.
std::string global_parameters_digest(const SafetensorsContent& strategy) {
  std::string digest;
  for (const auto& [name, tensor] : strategy.tensors) {
    if (name.rfind("outer/", 0) != 0 || name.compare(name.size() - 6, 6, "global") != 0) continue;
    const torch::Tensor values = tensor.contiguous();
    digest += fmt::format("{} {} ", name,
                          crc32_hex(std::string_view(static_cast<const char*>(values.data_ptr()), values.nbytes())));
  }
  return digest;
}

}  // namespace

void require_parts_agree(comm::Group& group, const char* part, const LoadedCheckpoint& checkpoint,
                         const nlohmann::json& schedule) {
  const CheckpointState& state = checkpoint.state;
  const std::pair<const char*, std::string> fields[] = {
      // Only replicas hold the same strategy state (each stage holds its part's), as with the schedule.
      {"set of outer global parameters", schedule.is_null() ? "" : global_parameters_digest(checkpoint.strategy)},
      {"step", std::to_string(state.step)},
      {"AdamW step count", std::to_string(state.optimizer_steps)},
      {"token count", std::to_string(state.tokens)},
      {"data position", state.sampler.dump()},
      {"synchronisation schedule", schedule.dump()},
  };
  std::string all;
  for (const auto& [name, value] : fields) all += value + "\n";
  if (group.ranks_differing_from_rank_0(std::string_view(all)).empty()) return;
  for (const auto& [name, value] : fields) {  // every rank compares every field, in the same order
    const auto differing = group.ranks_differing_from_rank_0(std::string_view(value));
    if (differing.empty()) continue;
    throw CheckpointError(fmt::format(
        "the parts of checkpoint {} disagree: {} {} hold{} another {} than {} 0 (this {} {}'s part, {}, holds {}). "
        "The parts of one checkpoint are written at the same step of one run, so one was edited or copied from "
        "another step or run. Resume from another checkpoint of the run",
        checkpoint.dir.filename().string(), part, fmt::join(differing, ", "), differing.size() == 1 ? "s" : "",
        name, part, part, group.rank(), checkpoint.dir.string(), value.substr(0, 300)));
  }
}

void require_own_part(const LoadedCheckpoint& part, int rank, int stage) {
  if (!part.state.part || (part.state.part->replica == rank && part.state.part->stage == stage)) return;
  const auto name = [](std::int64_t replica, std::int64_t stage) {
    return fmt::format("replica {}{}", replica, stage > 0 ? fmt::format(", stage {}", stage) : "");
  };
  throw CheckpointError(fmt::format(
      "{} is the part of {} (its state.json says so), but it sits where the part of {} belongs: it was copied "
      "there, or the parts were swapped. Each replica and stage resumes from its own part; resume from another "
      "checkpoint of the run, or copy the run's directory again whole",
      part.dir.string(), name(part.state.part->replica, part.state.part->stage), name(rank, stage)));
}

void require_part_for(const RunConfig& run, const fs::path& given, int rank, int stage) {
  const fs::path checkpoint = checkpoint_location(given);
  std::error_code no_state;
  if (!fs::exists(checkpoint / "state.json", no_state)) return;  // read_checkpoint names what is missing
  const RunConfig saved = read_checkpoint_config(checkpoint);
  // An elastic member's checkpoint is one member's, with its synchronisation points; a static run's has a part
  // per replica. Resumed as the other kind, one was "incomplete" and the other "of another algorithm".
  if (saved.dist.elastic != run.dist.elastic) {
    throw ConfigError(
        saved.dist.elastic
            ? fmt::format("checkpoint {} is an elastic member's (written with dist.elastic = true), and this run "
                          "is static: resume it as that member, with dist.elastic = true under the run's "
                          "coordinator (docs/fault-tolerance.md), or start a static run from its exported weights",
                          checkpoint.string())
            : fmt::format("checkpoint {} is a static run's (written with dist.elastic = false), and this run is "
                          "elastic: resume it with dist.elastic = false, or start the elastic run from its "
                          "exported weights",
                          checkpoint.string()));
  }
  // --resume names the run's checkpoint, which each replica and stage maps to its own part; a part named
  // instead was mapped once more (OUT/replica_1/replica_1/checkpoints/step_N). A run of its own named stage_2
  // (one replica, one stage) is no part.
  const fs::path holder = checkpoint.parent_path().parent_path();
  const std::string holder_name = holder.filename().string();
  std::error_code no_config;
  if ((holder_name.rfind("replica_", 0) == 0 || holder_name.rfind("stage_", 0) == 0) &&
      fs::exists(holder.parent_path() / "config.toml", no_config) &&
      (saved.dist.replicas > 1 || saved.dist.stages > 1)) {
    throw ConfigError(fmt::format("{} is the part of one replica or stage ({}) of a checkpoint; --resume names the "
                                  "run's own, {}, and each replica and stage reads its part of it",
                                  checkpoint.string(), holder_name,
                                  (holder.parent_path() / "checkpoints" / checkpoint.filename()).string()));
  }
  const auto part_of = [&](const fs::path& whole) { return stage_checkpoint(replica_checkpoint(whole, rank), stage); };
  const fs::path part = part_of(checkpoint);
  if (fs::exists(part / "state.json")) return;
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> counts[] = {
      {"dist.replicas", {run.dist.replicas, saved.dist.replicas}},
      {"dist.stages", {run.dist.stages, saved.dist.stages}},
  };
  for (const auto& [key, values] : counts) {
    if (values.first == values.second) continue;
    throw ConfigError(fmt::format("checkpoint {} was written with {} = {}, but this run has {}: it has no part {} "
                                  "(each replica and stage resumes from its own). Resume with {} = {}",
                                  checkpoint.string(), key, values.second, values.first, part.string(), key,
                                  values.second));
  }
  // The same counts, and a part missing: its process stopped before writing it (killed between the replicas'
  // writes), or it was removed. The latest earlier checkpoint this part has is named, if any.
  const auto this_step = checkpoint_step(checkpoint.filename().string());
  std::string earlier;
  std::int64_t earlier_step = -1;
  std::error_code unreadable;
  for (const auto& entry : fs::directory_iterator(checkpoint.parent_path(), unreadable)) {
    const auto step = checkpoint_step(entry.path().filename().string());
    if (!step || *step >= this_step.value_or(0) || *step <= earlier_step) continue;
    if (fs::exists(entry.path() / "state.json") && fs::exists(part_of(entry.path()) / "state.json")) {
      earlier_step = *step;
      earlier = entry.path().string();
    }
  }
  throw CheckpointError(fmt::format(
      "checkpoint {} is incomplete: the part of replica {}{} ({}) is missing; its process stopped before writing "
      "it, or it was removed. {}",
      checkpoint.string(), rank, stage > 0 ? fmt::format(", stage {},", stage) : "", part.string(),
      earlier.empty()
          ? fmt::format("No earlier checkpoint holds that part either: start the run again with another "
                        "train.out_dir (a new run does not write over the checkpoints in {})",
                        checkpoint.parent_path().parent_path().string())
          : fmt::format("Resume from {}, the latest checkpoint that holds every part this one lacks", earlier)));
}

void require_resumable(const LoadedCheckpoint& checkpoint, std::int64_t total_steps) {
  if (checkpoint.state.step >= total_steps) {
    // Suggest the key the run was sized by: with a token budget, steps are derived from it.
    const TrainConfig& t = checkpoint.config.train;
    const std::string more = t.tokens > 0 ? fmt::format("train.tokens={}", 2 * t.tokens)
                                          : fmt::format("train.steps={}", 2 * checkpoint.state.step);
    throw ConfigError(fmt::format("checkpoint {} is already at step {} of {}; give the run more to do to train "
                                  "further (for example --set {})",
                                  checkpoint.dir.string(), checkpoint.state.step, total_steps, more));
  }
}

std::optional<std::string> other_training_data_note(const LoadedCheckpoint& checkpoint,
                                                    const std::filesystem::path& data_dir, std::uint64_t train_tokens) {
  const nlohmann::json& position = checkpoint.state.sampler;
  if (!position.contains(kTrainTokensKey) || !position[kTrainTokensKey].is_number_unsigned()) return std::nullopt;
  const auto trained_on = position[kTrainTokensKey].get<std::uint64_t>();
  if (trained_on == train_tokens) return std::nullopt;
  return fmt::format(
      "the training split of {} holds {} tokens, and the run of checkpoint {} trained on one of {}: it "
      "goes on in these data from its saved position (epoch {}, window {}), as continued training "
      "does. If the data were meant to be the same, point data.dir at them",
      data_dir.string(), train_tokens, checkpoint.dir.string(), trained_on, position.value("epoch", std::uint64_t{0}),
      position.value("cursor", std::uint64_t{0}));
}

}  // namespace loco
