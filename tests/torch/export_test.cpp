// `loco export` writes what transformers' LlamaForCausalLM.from_pretrained loads. transformers is
// not a Debian package, so the check loads the export with the Python reference model (HF
// semantics, strict about config keys and tensor names: tests/reference/check_export.py) and
// compares its logits with loco's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loco/model/hf_export.h"
#include "loco/model/llama.h"
#include "loco/model/weights.h"
#include "loco/train/trainer.h"
#include "support/test_support.h"
#include "torch/tiny_run.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

bool reference_python_available() {
  const std::string probe = std::string(LOCO_PYTHON) + " -c 'import torch, numpy' >/dev/null 2>&1";
  return std::string(LOCO_PYTHON).size() > 0 && std::system(probe.c_str()) == 0;
}

TEST(Export, ReferenceImplementationLoadsItAndAgreesOnLogits) {
  if (!reference_python_available()) GTEST_SKIP() << "Debian's python3-torch is not installed";
  test::ScratchDir dir;
  for (bool tied : {false, true}) {
    RunConfig config = test::tiny_run_config(dir.path(), tied ? "tied" : "untied", 3);
    config.model.tie_word_embeddings = tied;
    Trainer(TrainOptions{config, std::nullopt, true}).run();
    const auto checkpoint = dir / (tied ? "tied" : "untied") / "checkpoints" / "step_3";
    const auto saved = load_safetensors(checkpoint / "model.safetensors");
    config.model.vocab_size = 258;
    Llama model(config.model);
    load_model_weights(model, saved);

    const fs::path out = dir / (tied ? "hf_tied" : "hf_untied");
    write_hf_export(out, hf_config_json(config.model, 256, 257), model_parameters(model), data::ByteTokenizer(),
                    checkpoint);
    EXPECT_EQ(load_safetensors(out / "model.safetensors").tensors.count("lm_head.weight"), tied ? 0u : 1u);

    torch::Tensor ids = torch::randint(0, 258, {2, 16}, torch::kInt64);
    torch::Tensor logits;
    {
      torch::NoGradGuard no_grad;
      logits = model->forward(ids);
    }
    save_safetensors(dir / "expected.safetensors", {{"input_ids", ids}, {"logits", logits}});
    const std::string cmd = std::string(LOCO_PYTHON) + " " + LOCO_SOURCE_DIR + "/tests/reference/check_export.py " +
                            out.string() + " " + (dir / "expected.safetensors").string();
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  }
}

TEST(Export, ConfigJsonRoundTripsThroughTheHfKeys) {
  ModelConfig c;
  c.vocab_size = 300;
  c.hidden_size = 48;
  c.intermediate_size = 128;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 3;
  c.max_position_embeddings = 256;
  c.rope_theta = 50000;
  c.tie_word_embeddings = true;
  const auto json = hf_config_json(c, 1, 2);
  EXPECT_EQ(json.at("architectures")[0], "LlamaForCausalLM");
  EXPECT_EQ(json.at("head_dim"), 8);
  const ModelConfig back = model_config_from_hf_json(json);
  EXPECT_EQ(back.num_key_value_heads, 3);
  EXPECT_EQ(back.intermediate_size, 128);
  EXPECT_DOUBLE_EQ(back.rope_theta, 50000);
  EXPECT_TRUE(back.tie_word_embeddings);
}

}  // namespace
}  // namespace loco
