#include "loco/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <chrono>

#include "loco/comm/comm_error.h"
#include "loco/comm/group.h"
#include "loco/config/algorithms.h"
#include "loco/config/load_config.h"
#include "loco/data/batch_sampler.h"
#include "loco/data/dataset_meta.h"
#include "loco/model/weights.h"
#include "loco/pipeline/partition.h"
#include "loco/pipeline/stages/measured_partition.h"
#include "loco/pipeline/stages/stage_runner.h"
#include "loco/train/checkpoint.h"
#include "loco/train/communication_totals.h"
#include "loco/train/cuda_graph.h"
#include "loco/train/divergence.h"
#include "loco/train/emulated_clock.h"
#include "loco/train/evaluate.h"
#include "loco/train/fault_injection.h"
#include "loco/train/fixed_membership.h"
#include "loco/train/inner_optimizer.h"
#include "loco/train/memory_need.h"
#include "loco/train/metrics.h"
#include "loco/train/progress.h"
#include "loco/train/replica_state.h"
#include "loco/train/resume_checks.h"
#include "loco/train/run_directory.h"
#include "loco/train/runtime.h"
#include "loco/train/schedule.h"
#include "loco/train/step_profiler.h"
#include "loco/train/stop_checks.h"
#include "loco/train/trainer_state.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/json_problem.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"
#include "loco/util/stop_requested.h"
#include "loco/util/torch_compat.h"

namespace loco {

namespace fs = std::filesystem;

namespace {

using Clock = SteadyClock;

// The weights a run starts from: each parameter drawn from the seed and its name (Llama::init_weights),
// so a pipeline stage's part holds what the whole model would.
Llama initial_model(const RunConfig& config, const ModelPart& part) {
  Llama model(config.model, part);
  model->init_weights(static_cast<std::uint64_t>(config.train.seed));
  return model;
}

}  // namespace

Trainer::Trainer(TrainOptions options) : state_(std::make_unique<State>(std::move(options))) {}

Trainer::~Trainer() = default;

const std::vector<double>& Trainer::step_losses() const { return state_->step_losses; }

TrainSummary Trainer::run() {
  State& s = *state_;
  try {
    set_up();
    restore();
    s.profiler = StepProfiler::from_environment(s.device.is_cuda(), s.step, s.config.train.steps);
  } catch (const StopRequested& stop) {
    // An elastic member signalled while it waited for its first quorum: it stops where it started.
    if (!s.communication) throw;
    note_stop_while_waiting(stop.signal(), stop.what());
    s.summary.stopped_by = stop.signal();
    s.start = Clock::now();
    return summarise();
  } catch (...) {
    // A refused run leaves no empty directory behind: its own, when it made it (parents it made may be other
    // replicas' or members' too, and stay), and holds its lock. Not when another run's lock refused this one: two
    // runs started at once into one new directory both found it missing, and the refused one removed it under the
    // winner, which then failed too. A check after the claim let the lock go with it: taken again.
    std::error_code ignored;
    const auto holds = [&] {
      if (s.out_dir_lock) return true;
      try {
        s.out_dir_lock.emplace(s.out_dir, "train.out_dir");
        return true;
      } catch (const ConfigError&) {
        return false;
      }
    };
    if (s.made_out_dir && holds() && fs::is_empty(s.out_dir, ignored)) fs::remove(s.out_dir, ignored);
    throw;
  }
  announce();
  s.start = s.interval_start = Clock::now();
  s.progress.emplace(s.config.train.steps);
  const auto fault = FaultInjection::from_environment();
  // Warm-up, capture and replay all on one side stream (note "cuda-graphs").
  std::optional<CudaSideStream> side_stream;
  if (s.micro_batch_graph) side_stream.emplace();
  try {
    while (s.step < s.config.train.steps) {
      const StepResult result = train_step();
      if (fault && result.taken) fault->after_step(s.step);
      // A member whose wait for a quorum a stop ended stops alone, as members do (agreed_stop).
      const int stop = s.stopped_waiting != 0 ? s.stopped_waiting : agreed_stop();
      if (result.taken && (s.log_due() || stop != 0)) log(result);
      if (stop != 0 ? s.checkpoint_before_stopping() : s.checkpoint_due()) save();
      if (s.options.after_step && result.taken) s.options.after_step(s.step);
      if (stop == kGaveUpWaiting) give_up_waiting();
      if (stop != 0) {
        s.summary.stopped_by = stop;
        break;
      }
    }
  } catch (const comm::CommError& e) {
    // A static run whose peer failed (killed, its host gone) ends here on every rank that is left: said with
    // where the run starts again (an elastic member's failures are its strategy's to handle).
    if (s.config.dist.elastic) throw;
    std::string what = e.what();
    while (!what.empty() && what.back() == '.') what.pop_back();
    throw comm::CommError(
        fmt::format("{}. The run stopped; {}, once every rank can run again (with the command the run "
                    "was started with, and --resume)",
                    what, s.start_again_advice()));
  }
  if (!s.quiet) s.progress->finish();
  return summarise();
}

// Device, data, resume checks, run directory, then the replica: model, optimizer, sampler, clock and
// strategy, attached to each other. Everything a bad config or checkpoint can break fails here,
// before the first step.
void Trainer::set_up() {
  State& s = *state_;
  RunConfig& config = s.config;
  const TrainConfig& tc = config.train;
  // The data are where they were when the run started, wherever it is resumed from: a relative data.dir written
  // into config.toml and the checkpoints was looked up from the resume's working directory, and trained on other
  // data found there without a word; a link (data/current → data/v1) was followed again at the resume, and
  // trained on whatever it then pointed to (audit round 14). The path with its links resolved is written.
  std::error_code unresolved;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(config.data.dir), unresolved);
  config.data.dir = (unresolved ? fs::absolute(config.data.dir).lexically_normal() : resolved).string();
  if (!s.options.make_strategy && algorithm_named(config.dist.algorithm) != Algorithm::none) {
    throw InternalError(fmt::format("dist.algorithm {} needs a strategy factory", config.dist.algorithm));
  }

  s.device = resolve_device(tc.device, "train.device");
  configure_threads(tc.threads, s.device);
  s.bf16 = tc.autocast == "bf16";
  if (s.bf16 && !s.device.is_cuda()) {
    // A GPU preset on a machine without one resolves train.device = "auto" to the CPU: the fix there is autocast.
    throw ConfigError(
        fmt::format("train.autocast = \"bf16\" needs a CUDA device, but this run trains on the {} "
                    "(train.device = \"{}\"). Set train.autocast = \"none\" to train on the CPU, or "
                    "run it where a GPU is visible",
                    s.device.str(), config.train.device));
  }

  // Its tokenizer goes into every checkpoint: checked now, not after training.
  data::require_prepared_tokenizer(config.data.dir, data::read_dataset_meta(config.data.dir));
  s.train_data = data::TokenDataset::open(config.data.dir, "train");
  s.val_data = data::TokenDataset::open(config.data.dir, "val");
  config.model.vocab_size =
      data::model_vocabulary(config.model.vocab_size, s.train_data->vocab_size(), config.data.dir);
  if (s.options.membership == nullptr) {
    s.own_membership = std::make_unique<FixedMembership>(s.group, config.dist.replicas, config.dist.backend == "local");
  }
  s.membership = s.options.membership ? s.options.membership : s.own_membership.get();
  s.access = std::make_unique<Access>(*this);
  s.membership->attach(*s.access);
  // Elastic members' data directories are not compared yet (docs/data.md).
  s.membership->check_same_data(config.data.dir);
  // Fails now, not after training, when the validation split cannot hold one sequence, or when a token of the
  // windows every evaluation reads is outside the vocabulary (a corrupted shard): reading them checks each id.
  if (s.validates()) {
    const BatchLoss read_only = [](const torch::Tensor&, const torch::Tensor&) { return 0.0; };
    evaluate_batches(read_only, *s.val_data, tc.eval_batches, tc.batch_size, config.data.seq_len, torch::kCPU);
  }

  if (s.options.resume_from) {
    require_part_for(config, *s.options.resume_from, s.rank, s.stage);
    s.resumed = read_checkpoint(stage_checkpoint(replica_checkpoint(*s.options.resume_from, s.rank), s.stage));
    require_own_part(*s.resumed, s.rank, s.stage);
  }
  // pipeline.partition = "measured": the split found (or, on a resume, the checkpoint's) is the run's from
  // here on, named in its config.toml and checkpoints (docs/pipeline.md).
  if (s.options.pipeline && config.pipeline.partition == "measured") {
    config.pipeline.partition = s.resumed ? s.resumed->config.pipeline.partition
                                          : pipeline::measured_partition(config, *s.options.pipeline, s.group, s.device);
  }
  if (s.resumed) {
    require_same_model(config, *s.resumed);
    require_same_data_stream(config, *s.resumed);
    require_same_fragments(config, *s.resumed);
    require_same_tokenizer(config.data.dir, *s.resumed);
  }
  ModelPart part = ModelPart::whole(config.model);
  if (s.options.pipeline) {
    part = pipeline::stage_part(pipeline::model_partition(config.model, s.options.pipeline->size(),
                                                          config.pipeline.partition),
                                s.stage);
  }
  // Note "memory-need": on the CPU a run beyond the machine's memory is refused before it grows into it
  // (and before its directory is made).
  if (!s.device.is_cuda()) {
    require_room_to_compute("loco train");
    const int replicas_here = config.dist.backend == "local" ? s.replicas() : 1;
    require_host_memory(memory_need(config, part.first_layer, part.end_layer, part.takes_tokens, part.gives_logits,
                                    /*keeps_attention_scores=*/LOCO_HAS_SDPA == 0),
                        replicas_here, usable_host_memory_bytes());
  }
  s.out_dir = stage_directory(s.membership->directory(tc.out_dir), s.stage);
  s.made_out_dir = !fs::exists(s.out_dir);
  s.out_dir_lock = claim_run_directory(s.out_dir, tc.out_dir, s.options.resume_from);
  const auto interrupted = remove_interrupted_checkpoints(s.out_dir / "checkpoints");
  if (!interrupted.empty()) {
    loco::print_unchecked(stderr, "removed what a stopped run left while writing a checkpoint in {}: {}\n",
                          (s.out_dir / "checkpoints").string(), fmt::join(interrupted, ", "));
  }
  if (s.resumed) agree_on_resume();

  s.model = initial_model(config, part);
  s.model->to(s.device);
  if (s.options.pipeline) {
    s.stage_runner = std::make_unique<pipeline::StageRunner>(s.model, *s.options.pipeline, config);
  }
  s.optimizer.emplace(model_parameters(s.model), config.optim, /*fused_on_cuda=*/tc.cuda_graphs);
  // An elastic run's members read one global order of windows, laid out by each quorum (note "elastic-data").
  const DataSlice slice = s.membership->data_slice();
  s.sampler.emplace(*s.train_data, config.data.seq_len, static_cast<std::uint64_t>(tc.seed), slice.rank, slice.of,
                    true);
  // CPU time measures a replica's compute only where it computes on one core: one intra-op thread and a
  // BLAS pool cut to one thread per call (note "blas-pool"), as when replicas share the machine.
  const bool on_one_core = !s.device.is_cuda() && intra_op_threads(tc.threads, s.device) == 1 &&
                           blas_threads_per_call() == 1;
  const int stages = s.options.pipeline ? s.options.pipeline->size() : 1;
  s.clock.emplace(replica_compute_seconds(s.group, on_one_core,
                                          config.dist.backend == "local" ? s.replicas() * stages : 1));
  const ReplicaContext context{s.group,
                               &*s.clock,
                               tc.steps,
                               static_cast<std::uint64_t>(tc.seed),
                               config.replica_batch() * config.data.seq_len,
                               s.access.get(),
                               s.membership};
  s.strategy = s.options.make_strategy ? s.options.make_strategy(config, context) : std::make_unique<SingleReplica>();
  s.strategy->attach(s.model, s.optimizer->parameters());
  s.step_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(s.device));
  decide_capture();
}

// Note "cuda-graphs": a step is captured where every part of it can be: a CUDA build with graphs, a fused
// optimizer update, and no host code between a micro-batch's kernels (data parallel's bucket hooks, a
// pipeline stage's sends and receives).
void Trainer::decide_capture() {
  State& s = *state_;
  if (!s.device.is_cuda()) return;
  std::string why_not;
  if (!s.config.train.cuda_graphs) {
    why_not = "train.cuda_graphs = false, the default until the captured step is verified on a GPU";
  } else if (!cuda_graphs_supported()) {
    why_not = "this build has none: it needs a CUDA libtorch 2.4 or later, built with LOCO_CUDA_GRAPHS=ON";
  } else if (s.stage_runner) {
    why_not = "pipeline stages exchange activations between a micro-batch's kernels";
  } else if (s.strategy->acts_during_backward()) {
    why_not = fmt::format("{} runs host code during backward", s.config.dist.algorithm);
  } else if (!s.optimizer->updates_on_device()) {
    why_not = "the optimizer's update is not the fused one (it needs float32 parameters)";
  }
  if (!why_not.empty()) {
    s.capture_decision = "off (" + why_not + ")";
    return;
  }
  s.capture_decision = "each micro-batch's forward and backward and each update replayed as a graph (captured "
                       "after 3 calls; train.cuda_graphs = false: kernel by kernel)";
  s.micro_batch_graph.emplace();
  s.update_graph.emplace();
  const auto ids = torch::TensorOptions().dtype(torch::kInt64).device(s.device);
  s.static_inputs = torch::empty({s.config.train.micro_batch_size, s.config.data.seq_len}, ids);
  s.static_targets = torch::empty_like(s.static_inputs);
}

// A resume continues the checkpoint's run exactly: weights, AdamW moments, the strategy's outer state,
// the data position and the counts so far. A fresh run starts at step 0 with nothing counted.
void Trainer::restore() {
  State& s = *state_;
  const nlohmann::json counted_before = s.resumed ? s.resumed->state.communication : nlohmann::json::object();
  std::function<comm::CommStats()> counted = s.options.communication_stats;
  if (s.group) counted = [group = s.group] { return group->stats(); };
  s.communication.emplace(counted_before, s.group, std::move(counted), *s.clock);
  if (s.resumed) apply_everywhere(*s.resumed);
  // Written once the model, the strategy and a resumed state were accepted: a run refused before (a
  // checkpoint whose optimizer state does not fit, say) leaves the directory's config.toml as it was.
  write_file_atomic(s.out_dir / "config.toml", to_toml(s.config));
  s.metrics.emplace(s.out_dir, s.resumed ? s.step : -1);
  s.strategy->begin();
}

// Note "run-checkpoints": each replica and stage checks its own part of a checkpoint as it applies it. One that
// refuses its part (tampered with, say) must stop the others before any of them writes into the run's
// directories or trains a step: it leaves the run with its error, and the others learn it in one gather over
// the replica group then the pipeline group, which they pass only when every one applied its part.
void Trainer::apply_everywhere(const LoadedCheckpoint& checkpoint) {
  State& s = *state_;
  apply(checkpoint);
  try {
    for (comm::Group* group : {s.group, s.options.pipeline}) {
      if (group != nullptr && group->size() > 1) group->smallest_of_ranks(1);
    }
  } catch (const comm::CommError& e) {
    throw CheckpointError(fmt::format("another replica or stage of the run stopped while taking its part of checkpoint "
                                      "{} (its error says why: a part it refused, most likely); nothing was trained "
                                      "or written. ({})",
                                      s.options.resume_from->string(), e.what()));
  }
  // Each part was accepted alone; together they must be one moment of the run. The stages of a replica each
  // hold their own part of the strategy's state, so only its replicas compare their schedules.
  if (s.group != nullptr && s.group->size() > 1) {
    require_parts_agree(*s.group, "replica", checkpoint, s.strategy->schedule_of(checkpoint.state.strategy));
  }
  if (s.options.pipeline != nullptr && s.options.pipeline->size() > 1) {
    require_parts_agree(*s.options.pipeline, "stage", checkpoint, nullptr);
  }
}

void Trainer::apply(const LoadedCheckpoint& checkpoint) {
  State& s = *state_;
  load_model_weights(s.model, checkpoint.model);
  s.optimizer->load_state(checkpoint.optimizer, checkpoint.state.optimizer_steps);
  try {
    s.strategy->load_state(checkpoint.strategy, checkpoint.state.strategy);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type or missing
    throw CheckpointError(
        fmt::format("{}/state.json holds a strategy state that does not read as one ({}); it was "
                    "edited or corrupted. Resume from another checkpoint",
                    checkpoint.dir.string(), json_problem(e)));
  }
  s.sampler->restore(data::SamplerState::from_json(checkpoint.state.sampler));
  const auto other_data = other_training_data_note(checkpoint, s.config.data.dir, s.train_data->size());
  if (other_data && s.rank == 0 && s.stage == 0) loco::print_unchecked(stderr, "loco train: note: {}\n", *other_data);
  s.step = checkpoint.state.step;
  s.tokens = checkpoint.state.tokens;
  // A resume continues the checkpoint's clock. A heal during the run (the loop's clock started) goes on from the
  // donor's where it is ahead of this member's, never back: before, the donor's time was added to all of this
  // process's own, so that every heal mid-run added the member's run time once more (dashboards plot by it).
  s.elapsed_before = s.start == SteadyClock::time_point{}
                         ? checkpoint.state.elapsed_s
                         : std::max(s.elapsed_s(), checkpoint.state.elapsed_s) - seconds_since(s.start);
  // The captures may read tensors the state replaced (a heal mid-run): captured again after a warm-up.
  if (s.micro_batch_graph) s.micro_batch_graph->reset();
  if (s.update_graph) s.update_graph->reset();
}

// Note "run-checkpoints": a step is the run's once every replica and stage wrote it. A run stopped while they
// wrote one leaves some a checkpoint ahead of the others: that step is not the run's, and a resume from the
// run's latest step replaces it (before: it refused, and no checkpoint of the directory resumed). Each rank
// sees only its own directory (replicas may sit on other hosts), so the ranks agree on the run's latest step
// through their groups before any of them writes; all resume, or none.
void Trainer::agree_on_resume() {
  State& s = *state_;
  require_resumable(*s.resumed, s.config.train.steps);  // the same on every rank: before anything is agreed
  const std::int64_t resumed = s.resumed->state.step;
  const auto mine = list_checkpoints(s.out_dir / "checkpoints");
  std::int64_t run_latest = mine.empty() ? -1 : mine.back().first;
  for (comm::Group* group : {s.group, s.options.pipeline}) {  // the stage's replicas, then the replica's stages
    if (group != nullptr && group->size() > 1) run_latest = group->smallest_of_ranks(run_latest);
  }
  if (run_latest > resumed) {
    throw ConfigError(fmt::format("every replica of the run wrote {}, later than the checkpoint you resume from ({}); "
                                  "resuming here would overwrite it. Resume from {} or set another train.out_dir",
                                  checkpoint_name(run_latest), checkpoint_name(resumed),
                                  checkpoint_name(run_latest)));
  }
  for (const auto& [step, dir] : mine) {
    if (step <= resumed) continue;
    loco::print_unchecked(stderr,
                          "removing {}: the run's other replicas or stages did not write step {} (it was stopped while "
                          "they wrote it), so the run resumes from step {}\n",
                          dir.string(), step, resumed);
    std::error_code failed;
    if (!remove_tree(dir, failed)) {
      throw IoError(fmt::format("cannot remove {}: {}. Remove it by hand and resume again", dir.string(),
                                failed.message()));
    }
  }
}

void Trainer::announce() const {
  const State& s = *state_;
  const RunConfig& config = s.config;
  s.say(fmt::format("loco train: {} parameters ({} layers, hidden {}, heads {}/{} kv, vocab {}) on {} with {} threads",
                    s.stage_runner ? s.stage_runner->whole_model_parameters() : s.model->num_parameters(),
                    config.model.num_hidden_layers, config.model.hidden_size,
                    config.model.num_attention_heads, config.model.num_key_value_heads, config.model.vocab_size,
                    s.device.str(), torch::get_num_threads()));
  s.say(fmt::format("strategy: {}", s.strategy->describe()));
  if (s.device.is_cuda()) s.say("cuda graphs: " + s.capture_decision);
  // Every stage of the lead replica says what it holds (a stage's memory is the point of the stages).
  if (s.stage_runner && s.lead && !s.options.quiet) {
    loco::print_unchecked(stderr, "pipeline: {} stages per replica; this process is {}\n", s.stage_runner->stages(),
                          s.stage_runner->describe());
  }
  s.say(fmt::format("data: {} train tokens, {}; {} steps of {} sequences x {} tokens ({} per "
                    "replica, dist.batch = {}){}",
                    s.train_data->size(),
                    s.validates() ? fmt::format("{} validation tokens", s.val_data->size())
                                : "no validation split (prepared with --val-fraction 0): no eval loss",
                    config.train.steps, config.global_batch(),
                    config.data.seq_len, config.replica_batch(), config.dist.batch,
                    s.resumed ? fmt::format(", resuming after step {}", s.step) : ""));
}

// The next micro-batch's token ids and targets, (micro-batch, T) int64 on the device. Fresh tensors each
// time: the graph of a micro-batch reads them in its backward (embedding, loss), and a pipeline stage holds
// several micro-batches' graphs. On CUDA they are sampled into pinned memory and copied without waiting
// (the caching host allocator reuses a pinned block only once its copy has finished), so the host runs
// ahead of the device instead of waiting on each copy.
std::pair<torch::Tensor, torch::Tensor> Trainer::next_micro_batch() {
  State& s = *state_;
  const auto host = torch::TensorOptions().dtype(torch::kInt64).pinned_memory(s.device.is_cuda());
  torch::Tensor inputs = torch::empty({s.config.train.micro_batch_size, s.config.data.seq_len}, host);
  torch::Tensor targets = torch::empty_like(inputs);
  s.sampler->next_batch(s.config.train.micro_batch_size, inputs.data_ptr<std::int64_t>(),
                        targets.data_ptr<std::int64_t>());
  const bool non_blocking = s.device.is_cuda();
  return {inputs.to(s.device, non_blocking), targets.to(s.device, non_blocking)};
}

// The step's micro-batches forward and backward through the whole model, gradients accumulated; the step's
// loss (the mean over micro-batches), read once all of them are queued (note "device-step"). Captured, each
// micro-batch's ids are copied into the buffers the graph reads.
double Trainer::forward_backward() {
  State& s = *state_;
  const std::int64_t accumulation = s.config.accumulation_steps();
  s.step_loss.zero_();
  for (std::int64_t m = 0; m < accumulation; ++m) {
    const auto [inputs, targets] = next_micro_batch();
    s.strategy->before_backward(m + 1 == accumulation);
    if (s.micro_batch_graph) {
      s.static_inputs.copy_(inputs);
      s.static_targets.copy_(targets);
      s.micro_batch_graph->run([&] { micro_batch(s.static_inputs, s.static_targets); });
    } else {
      micro_batch(inputs, targets);
    }
  }
  return s.step_loss.item<double>();
}

// One micro-batch forward and backward, its share of the step's loss added to step_loss on the device.
void Trainer::micro_batch(const torch::Tensor& inputs, const torch::Tensor& targets) {
  State& s = *state_;
  torch::Tensor loss;
  {
    // Autocast covers the forward pass and the loss only, as torch.autocast is meant to be used:
    // backward runs in the dtypes the forward chose. A captured forward casts without autocast's cache.
    compat::CudaBf16Autocast autocast(s.bf16, /*cache_casts=*/!s.micro_batch_graph);
    loss = s.model->loss(inputs, targets) / static_cast<double>(s.config.accumulation_steps());
  }
  loss.backward();
  // Summed in float64, as the per-micro-batch reads it replaces summed them.
  s.step_loss.add_(loss.detach().to(torch::kFloat64));
}

// The same through this process's stage of a pipeline replica, in the schedule's order (docs/pipeline.md).
double Trainer::forward_backward_stage() {
  State& s = *state_;
  return s.stage_runner->train(static_cast<int>(s.config.accumulation_steps()), [&] { return next_micro_batch(); },
                               [&](bool last) { s.strategy->before_backward(last); });
}

// One optimizer step: micro-batches forward and backward (the strategy around each), clipping, AdamW,
// then the strategy's after_step (where DiLoCo-style strategies sync).
//
// Note "device-step": on a GPU the host queues work ahead of the device, and every read of a device value
// makes it wait until the device has caught up, leaving the device idle while the host queues what comes
// next. A step reads one value: its loss, once the last micro-batch's backward is queued and before the
// strategy exchanges anything, so that a replica whose loss is no longer finite stops before it sends
// gradients or parameters to others (an elastic run's survivors stay clean) and before anything is
// checkpointed. Clipping scales on the device; the gradient norm stays there until a log line reads it;
// token ids go up without waiting (next_micro_batch). A pipeline stage reads more: its exchanges with
// neighbours and the stages' shared norm are host values.
Trainer::StepResult Trainer::train_step() {
  State& s = *state_;
  const RunConfig& config = s.config;
  if (s.profiler) s.profiler->before_step(s.step + 1);
  StepResult result;
  const data::SamplerState data_before = s.sampler->state();
  s.optimizer->zero_grad();
  result.loss = s.stage_runner ? forward_backward_stage() : forward_backward();
  if (!std::isfinite(result.loss)) {
    throw Error(fmt::format("the loss became {} at step {}{}. {}", result.loss, s.step + 1,
                            s.replicas() > 1 ? fmt::format(" on replica {}", s.rank) : "", s.diverged_advice()));
  }
  // Elastic data parallel's synchronisation, with its wait for a quorum. A wait that ended takes no step: a
  // resumed run reads its windows again.
  if (ended_waiting([&] { s.strategy->after_backward(); })) {
    s.sampler->restore(data_before);
    result.taken = false;
    return result;
  }
  // After after_backward: an elastic data parallel member that adopted another's state there has its step.
  result.lr = learning_rate(config.optim, s.step, config.train.steps);
  s.optimizer->set_lr(result.lr);
  if (s.stage_runner) {
    // After the replicas' averaging (data parallel's): the sum of averaged copies is the average of sums.
    s.stage_runner->sum_tied_gradients();
    result.grad_norm = s.optimizer->clip_gradients(
        config.optim.grad_clip, [&](double own) { return s.stage_runner->whole_squared_norm(own); });
    s.optimizer->step();
  } else if (s.update_graph) {
    s.optimizer->begin_step();  // the host's part: counts the step where the captured update reads it
    s.update_graph->run([&] {
      s.grad_norm = s.optimizer->clip_gradients(config.optim.grad_clip);
      s.optimizer->update();
    });
    result.grad_norm = s.grad_norm;  // overwritten by the next replay: read by log() before that
  } else {
    result.grad_norm = s.optimizer->clip_gradients(config.optim.grad_clip);
    s.optimizer->step();
  }
  ++s.step;
  s.tokens += s.tokens_per_step();
  // Where DiLoCo-style strategies synchronise. A wait that ended there leaves the step taken and its
  // synchronisation not: the checkpoint holds the step with its synchronisation still to do, which a resumed
  // member does first (note "elastic-resume", elastic/quorum_membership.h).
  ended_waiting([&] { s.strategy->after_step(s.step); });
  if (s.profiler) s.profiler->after_step(s.step);
  s.step_losses.push_back(result.loss);
  s.summary.train_loss = result.loss;
  s.interval_tokens += s.tokens_per_step();
  ++s.interval_steps;
  return result;
}

// A metrics line (with an evaluation on the lead replica's evaluation steps) and the progress display.
void Trainer::log(const StepResult& result) {
  State& s = *state_;
  const double interval_s = seconds_since(s.interval_start);
  nlohmann::json record = {{"step", s.step},
                           {"tokens", s.tokens},
                           {"loss", result.loss},
                           {"lr", result.lr},
                           {"grad_norm", result.grad_norm.item<double>()},
                           {"tokens_per_s", s.interval_tokens / std::max(interval_s, 1e-9)},
                           {"elapsed_s", s.elapsed_s()}};
  record.update(s.communication->now());
  if (s.micro_batch_graph) record["cuda_graphs"] = s.micro_batch_graph->captured() && s.update_graph->captured();
  // What comm.round_kib = auto chose for the lead replica's last exchange, when it changes (every rank
  // of an exchange cuts the same rounds).
  if (const auto pacing = s.communication->pacing_change(); pacing && s.lead) s.say("comm: " + *pacing);
  s.strategy->add_log_fields(record);
  if (s.stage_runner) s.stage_runner->add_log_fields(record);
  if (s.evaluation_due()) evaluate_into(record);
  s.metrics->write(record);
  if (s.options.on_metrics) s.options.on_metrics(record);
  if (!s.quiet) {
    s.progress->update(s.step, seconds_since(s.start), s.interval_steps / std::max(interval_s, 1e-9),
                       fmt::format("loss {:.4f} lr {:.2e} {:.0f} tok/s", result.loss, result.lr,
                                   record["tokens_per_s"].get<double>()));
  }
  s.interval_start = Clock::now();
  s.interval_tokens = s.interval_steps = 0;
}

// Validation loss of the parameters a user would deploy (the strategy's evaluation parameters), on
// eval_batches × train.batch_size windows in micro-batches: the same windows whatever the number of
// replicas, so runs with different M are compared on the same tokens. Not training time.
void Trainer::evaluate_into(nlohmann::json& record) {
  State& s = *state_;
  const TrainConfig& tc = s.config.train;
  EmulatedClock::Pause pause(*s.clock);
  s.strategy->with_evaluation_parameters([&] {
    const std::int64_t eval_micro_batches = tc.eval_batches * tc.batch_size / tc.micro_batch_size;
    if (s.stage_runner) {
      const BatchLoss through_stages = [&](const torch::Tensor& inputs, const torch::Tensor& targets) {
        return s.stage_runner->loss(inputs, targets);
      };
      s.summary.eval = evaluate_batches(through_stages, *s.val_data, eval_micro_batches, tc.micro_batch_size,
                                        s.config.data.seq_len, s.device);
    } else {
      s.summary.eval = evaluate(s.model, *s.val_data, eval_micro_batches, tc.micro_batch_size, s.config.data.seq_len,
                                s.device, s.bf16);
    }
  });
  record["eval_loss"] = s.summary.eval.loss;
  record["eval_perplexity"] = s.summary.eval.perplexity;
  if (!s.quiet) {
    s.progress->note(fmt::format("step {}: eval loss {:.4f}, perplexity {:.2f}", s.step, s.summary.eval.loss,
                                 s.summary.eval.perplexity));
  }
}

std::pair<CheckpointState, CheckpointTensors> Trainer::snapshot() {
  State& s = *state_;
  // The strategy's tensors first: taking them waits for exchanges in flight (Streaming DiLoCo), whose
  // bytes then belong to the counts saved with them.
  CheckpointTensors tensors{model_parameters(s.model), s.optimizer->state_tensors(), s.strategy->state_tensors()};
  nlohmann::json position = s.sampler->state().to_json();
  position[kTrainTokensKey] = s.train_data->size();  // the split it is a position in (other_training_data_note)
  CheckpointState state{s.step,
                        s.tokens,
                        s.optimizer->steps_taken(),
                        s.elapsed_s(),
                        std::move(position),
                        s.strategy->state_json(),
                        s.communication ? s.communication->now() : nlohmann::json::object(),
                        /*part=*/std::nullopt};
  if (!s.config.dist.elastic) state.part = CheckpointState::Part{s.rank, s.stage};
  return {std::move(state), std::move(tensors)};
}

void Trainer::save() {
  State& s = *state_;
  EmulatedClock::Pause pause(*s.clock);
  const auto [state, tensors] = snapshot();
  // The loss of the step that diverged was finite (it is taken before the update): the weights say.
  if (const std::optional<std::string> tensor = first_non_finite(tensors.model)) {
    throw Error(fmt::format(
        "the weights are no longer finite after step {}{} ({} holds NaN or infinite values), so "
        "no checkpoint of them was written. {}",
        s.step, s.replicas() > 1 ? fmt::format(" on replica {}", s.rank) : "", *tensor, s.diverged_advice()));
  }
  try {
    s.summary.last_checkpoint =
        write_checkpoint(s.out_dir / "checkpoints", s.config, state, tensors, s.config.data.dir);
  } catch (const IoError& e) {
    // A full disk, mostly: what was written of it is gone (write_checkpoint takes its partial directory back),
    // and the run stops; the user needs to know which checkpoint is whole.
    throw IoError(
        fmt::format("{} The checkpoint of step {} was not written and the run stopped; {}, once it can "
                    "be written",
                    e.what(), s.step, s.start_again_advice()));
  }
  s.saved_step = s.step;
  if (!s.quiet) s.progress->note(fmt::format("checkpoint {}", s.summary.last_checkpoint.string()));
  try {
    remove_older_checkpoints(s.out_dir / "checkpoints", s.config.train.keep_checkpoints);
  } catch (const IoError& e) {  // the new checkpoint is whole: training goes on, keeping the old one
    loco::print_unchecked(stderr, "loco train: note: {}; the run goes on\n", e.what());
  }
}

TrainSummary Trainer::summarise() {
  State& s = *state_;
  TrainSummary& summary = s.summary;
  summary.steps = s.step;
  summary.tokens = s.tokens;
  summary.elapsed_s = seconds_since(s.start);
  const nlohmann::json totals = s.communication->now();
  summary.sim_wall_s = totals.at("sim_wall_s");
  summary.bytes_sent = totals.value("bytes_sent", std::uint64_t{0});
  const auto steps_run = static_cast<std::int64_t>(s.step_losses.size());
  summary.steps_trained = steps_run;
  summary.tokens_per_s = steps_run * s.tokens_per_step() / std::max(summary.elapsed_s, 1e-9);
  return summary;
}

}  // namespace loco
