// Note "memory-need": the memory a replica certainly holds, counted by hand for a small model, and the refusal
// of a run beyond the machine's memory before anything is allocated.
#include "loco/train/memory_need.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

#include "loco/util/error.h"

namespace loco {
namespace {

// hidden 8, intermediate 16, 2 heads of 4 with 1 key/value head, 3 layers, vocabulary 10, micro-batches of 2
// sequences of 5 tokens.
RunConfig small() {
  RunConfig c;
  c.model.hidden_size = 8;
  c.model.intermediate_size = 16;
  c.model.num_attention_heads = 2;
  c.model.num_key_value_heads = 1;
  c.model.num_hidden_layers = 3;
  c.model.vocab_size = 10;
  c.model.tie_word_embeddings = false;
  c.data.seq_len = 5;
  c.train.micro_batch_size = 2;
  return c;
}

TEST(MemoryNeed, CountsWeightsStateAndActivationsByHand) {
  const MemoryNeed whole = memory_need(small(), 0, 3, true, true, true);
  // per layer: q, o 8·8 each; k, v 8·4 each; gate, up, down 8·16 each = 128 + 64 + 384 = 576; embedding and
  // head 10·8 each.
  EXPECT_EQ(whole.parameters, 3 * 576 + 2 * 80);
  EXPECT_DOUBLE_EQ(whole.state_bytes, 16.0 * (3 * 576 + 2 * 80));
  // per token and layer: 5·8 + 2·4 + 2·5 + 4·16 = 122 floats; 10 tokens, 3 layers.
  EXPECT_DOUBLE_EQ(whole.activation_bytes, 4.0 * 10 * 3 * 122);

  // A middle stage of one layer: no embedding, no head.
  const MemoryNeed middle = memory_need(small(), 1, 2, false, false, true);
  EXPECT_EQ(middle.parameters, 576);
  EXPECT_DOUBLE_EQ(middle.activation_bytes, 4.0 * 10 * 1 * 122);
  // A fused attention keeps no scores: 2·5 floats less per token and layer.
  EXPECT_DOUBLE_EQ(memory_need(small(), 1, 2, false, false, false).activation_bytes, 4.0 * 10 * 1 * 112);
  // The strategy's float32 copies: none alone, the outer step's three in the DiLoCo family (audit round 11: 20
  // DiLoCo replicas as threads held 3 times the weights' and AdamW's 16 bytes per parameter).
  EXPECT_DOUBLE_EQ(whole.strategy_bytes, 0);
  RunConfig diloco = small();
  diloco.dist.algorithm = "diloco";
  EXPECT_DOUBLE_EQ(memory_need(diloco, 0, 3, true, true, true).strategy_bytes, 12.0 * (3 * 576 + 2 * 80));
  diloco.dist.algorithm = "ddp";
  EXPECT_DOUBLE_EQ(memory_need(diloco, 0, 3, true, true, true).strategy_bytes, 4.0 * (3 * 576 + 2 * 80));
  // Tied embeddings: the head is the embedding.
  RunConfig tied = small();
  tied.model.tie_word_embeddings = true;
  EXPECT_EQ(memory_need(tied, 0, 3, true, true, true).parameters, 3 * 576 + 80);
}

TEST(MemoryNeed, ARunBeyondTheMachineIsRefusedNamingWhatToLower) {
  const MemoryNeed need = memory_need(small(), 0, 3, true, true, true);
  const double one = need.total_bytes(1);
  EXPECT_NO_THROW(require_host_memory(need, 1, one));
  EXPECT_NO_THROW(require_host_memory(need, 2, 2 * one));
  try {
    require_host_memory(need, 2, 2 * one - 1);
    FAIL() << "two replicas beyond the machine were not refused";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("2 replicas (threads of this process) need at least"), std::string::npos) << message;
    EXPECT_NE(message.find("Lower train.micro_batch_size"), std::string::npos) << message;
    EXPECT_NE(message.find("dist.backend = \"gloo\""), std::string::npos) << message;
  }
}

TEST(MemoryNeed, TheMachineHasSomeMemory) { EXPECT_GT(usable_host_memory_bytes(), 64.0 * 1024 * 1024); }

// Under ulimit -v OpenBLAS retries its first buffer without end when it does not fit beside what the process
// maps (a run hung at full CPU): refused, naming the limit. Room beside the mapping is no refusal.
TEST(MemoryNeed, AnAddressSpaceLimitWithoutRoomForTheBlasBuffersIsRefused) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &saved), 0);
  std::string said;
  {
    rlimit low = saved;
    low.rlim_cur = 64;  // below what is mapped: nothing new can be mapped, and the check maps nothing
    ASSERT_EQ(::setrlimit(RLIMIT_AS, &low), 0);
    try {
      require_room_to_compute("loco train");
    } catch (const ConfigError& e) {
      said = e.what();
    }
    ASSERT_EQ(::setrlimit(RLIMIT_AS, &saved), 0);
  }
  EXPECT_NE(said.find("loco train cannot compute under this address-space limit (ulimit -v 0 KiB)"), std::string::npos)
      << said;
  if (saved.rlim_cur == RLIM_INFINITY) {
    EXPECT_NO_THROW(require_room_to_compute("loco train"));
  }
}

}  // namespace
}  // namespace loco
