#include <gtest/gtest.h>
#include <torch/torch.h>

#include "loco/io/safetensors.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "support/test_support.h"

namespace loco {
namespace {

using test::ScratchDir;

TEST(Safetensors, RoundTripsDtypesShapesAndMetadata) {
  ScratchDir dir;
  NamedTensors tensors = {{"f32", torch::randn({3, 5})},
                          {"f64", torch::randn({2}, torch::kFloat64)},
                          {"bf16", torch::randn({4, 1}).to(torch::kBFloat16)},
                          {"i64", torch::arange(7)},
                          {"scalar", torch::tensor(2.5)},
                          {"empty", torch::zeros({0, 3})},
                          {"strided", torch::randn({4, 6}).t()}};
  save_safetensors(dir / "t.safetensors", tensors, {{"note", "hello"}});
  const auto loaded = load_safetensors(dir / "t.safetensors");
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const auto& back = loaded.at(name);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(back, t)) << name;
  }
  EXPECT_EQ(loaded.metadata.at("note"), "hello");
  // The file is streamed tensor by tensor; its bytes are the ones encode_safetensors builds in memory.
  EXPECT_EQ(read_file(dir / "t.safetensors"), encode_safetensors(tensors, {{"note", "hello"}}));
}

TEST(Safetensors, HeaderIsAlignedAndLittleEndian) {
  const std::string bytes = encode_safetensors({{"x", torch::ones({1})}}, {});
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(length % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + length + 4);
  EXPECT_EQ(bytes[8], '{');
}

TEST(Safetensors, TruncatedOrGarbledFilesAreCheckpointErrors) {
  ScratchDir dir;
  const std::string bytes = encode_safetensors({{"x", torch::ones({100})}}, {});
  write_file_atomic(dir / "short.safetensors", bytes.substr(0, bytes.size() - 10));
  EXPECT_THROW(load_safetensors(dir / "short.safetensors"), CheckpointError);
  write_file_atomic(dir / "tiny.safetensors", "abc");
  EXPECT_THROW(load_safetensors(dir / "tiny.safetensors"), CheckpointError);
  std::string garbled = bytes;
  garbled[9] = '#';
  write_file_atomic(dir / "garbled.safetensors", garbled);
  EXPECT_THROW(load_safetensors(dir / "garbled.safetensors"), CheckpointError);
  EXPECT_THROW(load_safetensors(dir / "absent.safetensors"), IoError);
}

TEST(Safetensors, MissingTensorIsNamed) {
  ScratchDir dir;
  save_safetensors(dir / "t.safetensors", {{"x", torch::ones({1})}});
  try {
    load_safetensors(dir / "t.safetensors").at("y");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos);
  }
}

}  // namespace
}  // namespace loco
