#include "loco/train/trainer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <charconv>
#include <chrono>
#include <mutex>

#include "loco/algo/make_strategy.h"
#include "loco/comm/group.h"
#include "loco/config/load_config.h"
#include "loco/data/batch_sampler.h"
#include "loco/model/weights.h"
#include "loco/train/checkpoint.h"
#include "loco/train/inner_optimizer.h"
#include "loco/train/metrics.h"
#include "loco/train/progress.h"
#include "loco/train/runtime.h"
#include "loco/train/schedule.h"
#include "loco/train/sim_clock.h"
#include "loco/train/step_profiler.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/torch_compat.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The data decide the vocabulary when the config leaves it at 0; a model smaller than the data's
// vocabulary could not embed its tokens.
void resolve_vocabulary(ModelConfig& model, std::uint32_t data_vocab, const std::string& data_dir) {
  if (model.vocab_size == 0) model.vocab_size = data_vocab;
  if (model.vocab_size < static_cast<std::int64_t>(data_vocab)) {
    throw ConfigError(fmt::format(
        "vocabulary mismatch: the data in {} uses {} token ids but model.vocab_size is {}. Set "
        "model.vocab_size = 0 to take the data's vocabulary, or prepare the data with --vocab-size {}",
        data_dir, data_vocab, model.vocab_size, model.vocab_size));
  }
}

void require_same_model(const RunConfig& run, const RunConfig& saved, const fs::path& checkpoint) {
  const auto a = to_json(run).at("model");
  const auto b = to_json(saved).at("model");
  for (const auto& [key, value] : b.items()) {
    if (a.at(key) != value) {
      throw ConfigError(fmt::format(
          "model.{} is {} in the config but {} in checkpoint {}; a run resumes with the model it was "
          "started with. Drop --config to use the checkpoint's config, or fix model.{}",
          key, a.at(key).dump(), value.dump(), checkpoint.string(), key));
    }
  }
}

// The saved data position means the same windows only with the same seed, sequence length and
// batch layout: anything else would silently train on another stream than the run it continues.
void require_same_data_stream(const RunConfig& run, const RunConfig& saved, const fs::path& checkpoint) {
  const std::pair<const char*, std::pair<std::string, std::string>> choices[] = {
      {"dist.algorithm", {run.dist.algorithm, saved.dist.algorithm}},
      {"dist.batch", {run.dist.batch, saved.dist.batch}},
  };
  for (const auto& [key, values] : choices) {
    if (values.first != values.second) {
      throw ConfigError(fmt::format("{} is \"{}\" but checkpoint {} was trained with \"{}\"; a run resumes with the "
                                    "algorithm and batch layout it was started with (or start a new run from the "
                                    "exported weights)",
                                    key, values.first, checkpoint.string(), values.second));
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
                                    key, values.first, checkpoint.string(), values.second, key, values.second));
    }
  }
}

// Refuses, before any work, a resume that would have nothing to do or would have to overwrite a
// later checkpoint of the same run.
void require_resumable(const LoadedCheckpoint& checkpoint, const fs::path& out_dir, std::int64_t total_steps) {
  if (checkpoint.state.step >= total_steps) {
    // Suggest the key the run was sized by: with a token budget, steps are derived from it.
    const TrainConfig& t = checkpoint.config.train;
    const std::string more = t.tokens > 0 ? fmt::format("train.tokens={}", 2 * t.tokens)
                                          : fmt::format("train.steps={}", 2 * checkpoint.state.step);
    throw ConfigError(fmt::format("checkpoint {} is already at step {} of {}; give the run more to do to train "
                                  "further (for example --set {})",
                                  checkpoint.dir.string(), checkpoint.state.step, total_steps, more));
  }
  const fs::path checkpoints = out_dir / "checkpoints";
  if (!fs::is_directory(checkpoints)) return;
  for (const auto& entry : fs::directory_iterator(checkpoints)) {
    const std::string name = entry.path().filename().string();
    std::int64_t step = 0;
    const char* digits = name.c_str() + 5;
    const char* end = name.c_str() + name.size();
    if (name.rfind("step_", 0) != 0 || std::from_chars(digits, end, step).ptr != end) continue;
    if (step > checkpoint.state.step) {
      throw ConfigError(fmt::format("{} holds {}, later than the checkpoint you resume from ({}); resuming here "
                                    "would overwrite it. Resume from the latest checkpoint or set another "
                                    "train.out_dir",
                                    checkpoints.string(), name, checkpoint_name(checkpoint.state.step)));
    }
  }
}

// Replicas of one process initialise their models one at a time: torch's default generator is
// shared, and each must draw the same initial weights from the seed.
std::mutex model_init_mutex;

// Compute time for the emulated wall clock (note "emulated-wall-clock"): with one intra-op thread on
// the CPU, the process's CPU time shared equally among the replicas it runs. Not the replica thread's
// own CPU time: BLAS may compute on threads of its own (measured: a single replica's main thread
// showed a third of the CPU time of the same work on a replica thread).
std::function<double()> compute_seconds(const comm::Group* group, bool single_cpu_thread, int local_replicas) {
  if (single_cpu_thread) return [local_replicas] { return process_cpu_seconds() / local_replicas; };
  const auto start = Clock::now();
  return [start, group] { return seconds_since(start) - (group ? group->stats().blocked_s : 0.0); };
}

}  // namespace

fs::path replica_directory(const fs::path& out_dir, int rank) {
  return rank == 0 ? out_dir : out_dir / fmt::format("replica_{}", rank);
}

fs::path replica_checkpoint(const fs::path& checkpoint, int rank) {
  if (rank == 0) return checkpoint;
  const fs::path checkpoints = checkpoint.parent_path();
  return replica_directory(checkpoints.parent_path(), rank) / checkpoints.filename() / checkpoint.filename();
}

struct Trainer::State {
  TrainOptions options;
  std::vector<double> step_losses;
};

Trainer::Trainer(TrainOptions options) : state_(std::make_unique<State>(State{std::move(options), {}})) {}

Trainer::~Trainer() = default;

const std::vector<double>& Trainer::step_losses() const { return state_->step_losses; }

TrainSummary Trainer::run() {
  RunConfig& config = state_->options.config;
  const TrainConfig& tc = config.train;
  comm::Group* group = state_->options.group;
  const int rank = group ? group->rank() : 0;
  const int replicas = group ? group->size() : 1;
  if (replicas != config.dist.replicas) {
    throw InternalError(fmt::format("dist.replicas is {} but the group has {} ranks", config.dist.replicas, replicas));
  }
  const bool lead = rank == 0;  // evaluates, shows progress
  const bool quiet = state_->options.quiet || !lead;
  auto say = [&](const std::string& line) {
    if (!quiet) fmt::print(stderr, "{}\n", line);
  };

  configure_threads(tc.threads);
  const torch::Device device = resolve_device(tc.device);
  const bool bf16 = tc.autocast == "bf16";
  if (bf16 && !device.is_cuda()) throw ConfigError("train.autocast = \"bf16\" needs train.device = \"cuda\"");

  const auto train_data = data::TokenDataset::open(config.data.dir, "train");
  const auto val_data = data::TokenDataset::open(config.data.dir, "val");
  resolve_vocabulary(config.model, train_data.vocab_size(), config.data.dir);
  // Fails now, not after training, when the validation split cannot hold one sequence.
  data::BatchSampler(val_data, config.data.seq_len, 0, 0, 1, /*shuffle=*/false);

  std::optional<LoadedCheckpoint> resumed;
  if (state_->options.resume_from) {
    resumed = read_checkpoint(replica_checkpoint(*state_->options.resume_from, rank));
    require_same_model(config, resumed->config, resumed->dir);
    require_same_data_stream(config, resumed->config, resumed->dir);
  }

  const fs::path out_dir = replica_directory(tc.out_dir, rank);
  ensure_writable_directory(out_dir, "train.out_dir");
  if (resumed) require_resumable(*resumed, out_dir, tc.steps);
  const bool has_metrics = fs::exists(out_dir / "metrics.jsonl") && fs::file_size(out_dir / "metrics.jsonl") > 0;
  if (!resumed && (has_checkpoints(out_dir / "checkpoints") || has_metrics)) {
    throw ConfigError(fmt::format(
        "train.out_dir '{}' already holds another run (checkpoints or metrics.jsonl); loco does not overwrite "
        "it. Pass --resume {}/checkpoints/step_N to continue that run, or choose another train.out_dir",
        tc.out_dir, tc.out_dir));
  }
  write_file_atomic(out_dir / "config.toml", to_toml(config));

  Llama model{nullptr};
  {
    // Construction draws from the generator too (libtorch's default initialisation).
    std::lock_guard<std::mutex> lock(model_init_mutex);
    torch::manual_seed(static_cast<std::uint64_t>(tc.seed));
    model = Llama(config.model);
    model->init_weights();
  }
  model->to(device);
  InnerOptimizer optimizer(model_parameters(model), config.optim);
  data::BatchSampler sampler(train_data, config.data.seq_len, static_cast<std::uint64_t>(tc.seed), rank, replicas,
                             true);
  SimClock clock(compute_seconds(group, tc.threads == 1 && !device.is_cuda(),
                                 config.dist.backend == "local" ? replicas : 1));
  const std::unique_ptr<Strategy> strategy_owner = make_strategy(config, ReplicaContext{group, &clock, tc.steps});
  Strategy& strategy = *strategy_owner;
  strategy.attach(model, optimizer.parameters());

  std::int64_t step = 0, tokens = 0;
  double elapsed_before = 0;
  if (resumed) {
    load_model_weights(model, resumed->model);
    optimizer.load_state(resumed->optimizer, resumed->state.optimizer_steps);
    strategy.load_state(resumed->strategy, resumed->state.strategy);
    sampler.restore(data::SamplerState::from_json(resumed->state.sampler));
    step = resumed->state.step;
    tokens = resumed->state.tokens;
    elapsed_before = resumed->state.elapsed_s;
  }
  MetricsWriter metrics(out_dir, resumed ? step : -1);

  say(fmt::format("loco train: {} parameters ({} layers, hidden {}, heads {}/{} kv, vocab {}) on {} with {} threads",
                  model->num_parameters(), config.model.num_hidden_layers, config.model.hidden_size,
                  config.model.num_attention_heads, config.model.num_key_value_heads, config.model.vocab_size,
                  device.str(), torch::get_num_threads()));
  say(fmt::format("strategy: {}", strategy.describe()));
  say(fmt::format("data: {} train tokens, {} validation tokens; {} steps of {} sequences x {} tokens ({} per replica, "
                  "dist.batch = {}){}",
                  train_data.size(), val_data.size(), tc.steps, config.global_batch(), config.data.seq_len,
                  config.replica_batch(), config.dist.batch,
                  resumed ? fmt::format(", resuming after step {}", step) : ""));

  const std::int64_t micro = tc.micro_batch_size;
  const std::int64_t accumulation = config.accumulation_steps();
  const std::int64_t tokens_per_step = config.global_batch() * config.data.seq_len;  // all replicas
  torch::Tensor inputs = torch::empty({micro, config.data.seq_len}, torch::kInt64);
  torch::Tensor targets = torch::empty({micro, config.data.seq_len}, torch::kInt64);

  Progress progress(tc.steps);
  TrainSummary summary;
  const auto start = Clock::now();
  // Counts of the run before this process started (a resume), added to this process's own.
  const nlohmann::json before = resumed ? resumed->state.communication : nlohmann::json::object();
  auto communication = [&]() -> nlohmann::json {
    nlohmann::json out = {{"sim_wall_s", before.value("sim_wall_s", 0.0) + clock.now()}};
    if (group) {
      const comm::CommStats stats = group->stats();
      out["bytes_sent"] = before.value("bytes_sent", std::uint64_t{0}) + stats.bytes_sent;
      out["bytes_recv"] = before.value("bytes_recv", std::uint64_t{0}) + stats.bytes_recv;
      out["comm_s"] = before.value("comm_s", 0.0) + stats.blocked_s;
    }
    return out;
  };
  auto interval_start = start;
  std::int64_t interval_tokens = 0, interval_steps = 0;
  auto save = [&]() {
    SimClock::Pause pause(clock);
    // The strategy's tensors first: taking them waits for exchanges in flight (Streaming DiLoCo), whose
    // bytes then belong to the counts saved with them.
    CheckpointTensors ct{model_parameters(model), optimizer.state_tensors(), strategy.state_tensors()};
    CheckpointState cs{step, tokens, optimizer.steps_taken(), elapsed_before + seconds_since(start),
                       sampler.state().to_json(), strategy.state_json(), communication()};
    summary.last_checkpoint = write_checkpoint(out_dir / "checkpoints", config, cs, ct, config.data.dir);
    if (!quiet) progress.note(fmt::format("checkpoint {}", summary.last_checkpoint.string()));
  };

  const auto profiler = StepProfiler::from_environment(device.is_cuda());
  while (step < tc.steps) {
    if (profiler) profiler->before_step(step + 1);
    const double lr = learning_rate(config.optim, step, tc.steps);
    optimizer.set_lr(lr);
    optimizer.zero_grad();
    double step_loss = 0;
    for (std::int64_t m = 0; m < accumulation; ++m) {
      sampler.next_batch(micro, inputs.data_ptr<std::int64_t>(), targets.data_ptr<std::int64_t>());
      torch::Tensor loss;
      {
        // Autocast covers the forward pass and the loss only, as torch.autocast is meant to be used:
        // backward runs in the dtypes the forward chose.
        compat::CudaBf16Autocast autocast(bf16);
        loss = model->loss(inputs.to(device), targets.to(device)) / static_cast<double>(accumulation);
      }
      strategy.before_backward(m + 1 == accumulation);
      loss.backward();
      step_loss += loss.item<double>();
    }
    if (!std::isfinite(step_loss)) {
      throw Error(fmt::format("the loss became {} at step {}{}. Lower optim.lr (now {}) or raise optim.warmup_steps; "
                              "resume from the last checkpoint in {}/checkpoints",
                              step_loss, step + 1, replicas > 1 ? fmt::format(" on replica {}", rank) : "",
                              config.optim.lr, tc.out_dir));
    }
    strategy.after_backward();
    const double grad_norm = optimizer.clip_gradients(config.optim.grad_clip);
    optimizer.step();
    ++step;
    tokens += tokens_per_step;
    strategy.after_step(step);
    if (profiler) profiler->after_step(step);
    state_->step_losses.push_back(step_loss);
    summary.train_loss = step_loss;
    interval_tokens += tokens_per_step;
    ++interval_steps;

    const bool last = step == tc.steps;
    const bool eval_now = lead && (last || (tc.eval_every > 0 && step % tc.eval_every == 0));
    if (step % tc.log_every == 0 || last || eval_now) {
      const double interval_s = seconds_since(interval_start);
      nlohmann::json record = {{"step", step},
                               {"tokens", tokens},
                               {"loss", step_loss},
                               {"lr", lr},
                               {"grad_norm", grad_norm},
                               {"tokens_per_s", interval_tokens / std::max(interval_s, 1e-9)},
                               {"elapsed_s", elapsed_before + seconds_since(start)}};
      record.update(communication());
      if (eval_now) {
        SimClock::Pause pause(clock);
        strategy.with_evaluation_parameters([&] {
          // eval_batches × train.batch_size windows, in micro-batches: the same windows whatever the
          // number of replicas, so runs with different M are compared on the same tokens.
          const std::int64_t eval_micro_batches = tc.eval_batches * tc.batch_size / micro;
          summary.eval = evaluate(model, val_data, eval_micro_batches, micro, config.data.seq_len, device, bf16);
        });
        record["eval_loss"] = summary.eval.loss;
        record["eval_perplexity"] = summary.eval.perplexity;
        if (!quiet) {
          progress.note(fmt::format("step {}: eval loss {:.4f}, perplexity {:.2f}", step, summary.eval.loss,
                                    summary.eval.perplexity));
        }
      }
      metrics.write(record);
      if (!quiet) {
        progress.update(step, seconds_since(start), interval_steps / std::max(interval_s, 1e-9),
                        fmt::format("loss {:.4f} lr {:.2e} {:.0f} tok/s", step_loss, lr,
                                    record["tokens_per_s"].get<double>()));
      }
      interval_start = Clock::now();
      interval_tokens = interval_steps = 0;
    }
    if (last || (tc.checkpoint_every > 0 && step % tc.checkpoint_every == 0)) save();
  }
  if (!quiet) progress.finish();

  summary.steps = step;
  summary.tokens = tokens;
  summary.elapsed_s = seconds_since(start);
  const nlohmann::json totals = communication();
  summary.sim_wall_s = totals.at("sim_wall_s");
  summary.bytes_sent = totals.value("bytes_sent", std::uint64_t{0});
  const std::int64_t steps_run = static_cast<std::int64_t>(state_->step_losses.size());
  summary.tokens_per_s = steps_run * tokens_per_step / std::max(summary.elapsed_s, 1e-9);
  return summary;
}

}  // namespace loco
