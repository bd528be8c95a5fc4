// The planning tools count a model's parameters from its config (sim/model_size.h, read through
// config/ as `loco train` reads it); the count must be that of the model loco trains.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "loco/config/load_config.h"
#include "loco/model/llama.h"
#include "loco/sim/model_size.h"

namespace loco {
namespace {

TEST(ParameterCount, MatchesTheModelLocoTrains) {
  for (const bool tied : {false, true}) {
    for (const std::int64_t kv_heads : {0, 2}) {
      RunConfig config;
      config.model.hidden_size = 48;
      config.model.num_hidden_layers = 3;
      config.model.num_attention_heads = 6;
      config.model.num_key_value_heads = kv_heads;
      config.model.vocab_size = 100;
      config.model.tie_word_embeddings = tied;
      resolve_derived(config);
      const Llama model(config.model);
      const double total = sim::count_parameters(config.model, sim::ParamConvention::kTotal, "test");
      EXPECT_EQ(total, static_cast<double>(model->num_parameters())) << "tied " << tied << ", kv " << kv_heads;
      const double embeddings = 100.0 * 48 * (tied ? 1 : 2);
      EXPECT_EQ(sim::count_parameters(config.model, sim::ParamConvention::kNonEmbedding, "test"), total - embeddings);
    }
  }
}

}  // namespace
}  // namespace loco
