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

// A file written by hand: the 8-byte little-endian header length, the header, then `data` bytes.
std::string by_hand(const std::string& header, std::size_t data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

std::string refusal_of(const ScratchDir& dir, const std::string& bytes) {
  write_file_atomic(dir / "hand.safetensors", bytes);
  try {
    load_safetensors(dir / "hand.safetensors");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// Two tensors over the same bytes would load as one tensor under two names; a name given twice would hide
// the first entry (the JSON parser keeps the last). Empty tensors take no bytes and may sit anywhere.
TEST(Safetensors, SharedBytesAndRepeatedNamesAreRefused) {
  ScratchDir dir;
  EXPECT_NE(refusal_of(dir, by_hand(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    12))
                .find("tensors 'a' and 'b' share bytes"),
            std::string::npos);
  EXPECT_NE(refusal_of(dir, by_hand(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                    8))
                .find("names 'a' twice"),
            std::string::npos);
  EXPECT_EQ(refusal_of(dir, by_hand(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                    R"("c":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                    12)),
            "");
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
