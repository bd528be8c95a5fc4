// The parameters a run evaluates, and a user deploys (docs/algorithms.md "What is evaluated"): θ_g for DiLoCo,
// Local SGD, SparseLoCo and Streaming DiLoCo, φ for NoLoCo, the model itself otherwise.
//
// Note "evaluated-parameters": a checkpoint holds its replica's own θ (model.safetensors), which between
// synchronisations (and, with Streaming's mixing, always) is not what the run evaluated; θ_g or φ is in
// strategy.safetensors, one flat vector per fragment laid out as the trainer lays the parameters (the inner
// optimizer's buffers, then the strategy's fragments). `loco eval`, `generate` and `export` read the model through
// this, so that a checkpoint's loss is the one the run reported at its step, and the export is the model evaluated.
#pragma once

#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"
#include "loco/model/llama.h"
#include "loco/train/checkpoint.h"

namespace loco {

// The model a checkpoint read for inference holds, with the parameters its run evaluates; a pipeline run's stage by
// stage, each from the outer state of its own part.
Llama evaluated_model(const LoadedCheckpoint& checkpoint, torch::Device device);

}  // namespace loco
