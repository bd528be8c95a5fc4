// SparseLoCo's compression (comm/codecs/sparse_topk.h, note "sparse-topk") against its Python transcription
// (tests/reference/sparseloco_ref.py; fixture written by tests/reference/make_sparseloco_fixture.py): two
// rounds of error feedback, the sparse mean and the outer step for 2 and 3 replicas, 2- and 4-bit codes, 2-D
// tensors in 64-wide and odd tiles, 1-D and prime lengths. A flipped sign, a dropped residual, a wrong tile or
// a tie broken the other way changes the indices, codes or accumulators compared here.
#include "loco/comm/codecs/sparse_topk.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "loco/comm/comm_error.h"
#include "loco/io/safetensors_header.h"
#include "loco/util/fs.h"

namespace loco::comm {
namespace {

class SparseFixture {
 public:
  SparseFixture()
      : path_(std::string(LOCO_FIXTURE_DIR) + "/sparseloco.safetensors"),
        bytes_(read_file(path_)),
        header_(parse_safetensors_header(reinterpret_cast<const std::uint8_t*>(bytes_.data()), bytes_.size(), path_)) {
    for (const auto& entry : header_.tensors) entries_[entry.name] = &entry;
    cases_ = nlohmann::json::parse(header_.metadata.at("cases"));
  }

  const nlohmann::json& cases() const { return cases_; }

  std::vector<float> floats(const std::string& name) const {
    const SafetensorsEntry& entry = at(name, SafetensorsDtype::f32);
    std::vector<float> out((entry.end - entry.begin) / sizeof(float));
    std::memcpy(out.data(), header_.data + entry.begin, entry.end - entry.begin);
    return out;
  }
  std::vector<std::int64_t> integers(const std::string& name) const {
    const SafetensorsEntry& entry = at(name, SafetensorsDtype::i64);
    std::vector<std::int64_t> out((entry.end - entry.begin) / sizeof(std::int64_t));
    std::memcpy(out.data(), header_.data + entry.begin, entry.end - entry.begin);
    return out;
  }

 private:
  const SafetensorsEntry& at(const std::string& name, SafetensorsDtype dtype) const {
    const auto found = entries_.find(name);
    if (found == entries_.end() || found->second->dtype != dtype) throw std::runtime_error("fixture lacks " + name);
    return *found->second;
  }

  std::filesystem::path path_;
  std::string bytes_;
  SafetensorsHeader header_;
  std::map<std::string, const SafetensorsEntry*> entries_;
  nlohmann::json cases_;
};

// Floats computed the same way in both: equal up to the last bit of the statistics (summed in another order).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-6 * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

TEST(SparseTopk, ErrorFeedbackMeanAndOuterStepMatchThePythonTranscription) {
  const SparseFixture fixture;
  for (const auto& [name, c] : fixture.cases().items()) {
    const int bits = c.at("bits");
    const auto k = c.at("k").get<std::size_t>();
    const float beta = c.at("beta").get<float>();
    const float eta = c.at("eta").get<float>();
    const int replicas = c.at("replicas");
    for (const auto& [tensor, shape] : c.at("shapes").items()) {
      const SparseTiling tiling(shape.get<std::vector<std::int64_t>>(), k);
      std::vector<float> theta = fixture.floats(fmt::format("{}/theta0/{}", name, tensor));
      std::vector<std::vector<float>> accumulators(replicas, std::vector<float>(tiling.numel(), 0.0f));
      for (int t = 0; t < c.at("rounds").get<int>(); ++t) {
        std::vector<SparseContribution> sent;
        for (int r = 0; r < replicas; ++r) {
          auto key = [&](const char* kind) { return fmt::format("{}/{}/{}/{}/{}", name, kind, t, r, tensor); };
          const std::string at = key("round");
          const std::vector<float> delta = fixture.floats(key("delta"));
          sent.push_back(sparse_error_feedback(accumulators[r].data(), delta.data(), beta, tiling, bits));
          std::vector<std::int64_t> flat;
          for (std::size_t i = 0; i < sent.back().tile_indices.size(); ++i) {
            flat.push_back(static_cast<std::int64_t>(tiling.flat_index(i / tiling.k(), sent.back().tile_indices[i])));
          }
          std::sort(flat.begin(), flat.end());
          std::vector<std::int64_t> want_flat = fixture.integers(key("indices"));
          std::vector<std::int64_t> want_codes = fixture.integers(key("codes"));
          // The reference lists each tile's indices in ascending order, tile after tile, as loco sends them.
          std::vector<std::int64_t> codes(sent.back().codes.begin(), sent.back().codes.end());
          EXPECT_EQ(codes, want_codes) << at;
          std::sort(want_flat.begin(), want_flat.end());
          EXPECT_EQ(flat, want_flat) << at;
          expect_close(sent.back().lookup, fixture.floats(key("lookup")), at + " lookup");
          expect_close({sent.back().shift}, fixture.floats(key("shift")), at + " shift");
          expect_close(accumulators[r], fixture.floats(key("e")), at + " accumulator");
        }
        std::vector<const SparseContribution*> all;
        for (const auto& s : sent) all.push_back(&s);
        std::vector<float> mean(tiling.numel());
        sparse_mean(all, tiling, mean.data());
        for (std::size_t i = 0; i < theta.size(); ++i) {
          const float step = eta * mean[i];
          theta[i] = theta[i] - step;
        }
        expect_close(theta, fixture.floats(fmt::format("{}/theta/{}/{}", name, t, tensor)), name + " theta " + tensor);
      }
    }
  }
}

TEST(SparseTopk, TilesFollowTheLargestDivisorsAndKStaysEven) {
  const SparseTiling square({128, 192}, 64);
  EXPECT_EQ(square.tiles(), 2u * 3u);
  EXPECT_EQ(square.tile_size(), 4096u);
  EXPECT_EQ(square.k(), 64u);
  EXPECT_EQ(square.flat_index(1, 0), 64u);                   // second tile of the first tile row
  EXPECT_EQ(square.flat_index(3, 65), 64u * 192 + 192 + 1);  // tile row 1, column 0; element (1, 1)
  const SparseTiling odd({40, 30}, 63);
  EXPECT_EQ(odd.tile_size(), 1200u);
  EXPECT_EQ(odd.k(), 62u);
  EXPECT_EQ(SparseTiling({7}, 64).k(), 6u);
  EXPECT_EQ(SparseTiling({1}, 64).k(), 1u);
  EXPECT_EQ(SparseTiling({96}, 64).tile_size(), 48u);
  // The k largest |e|; of equal ones the lower index (the Python transcription asserts the same case).
  const float tied[] = {0.5f, -3.0f, 2.0f, -2.0f, 0.1f, 1.0f};
  const SparseContribution picked = sparse_compress(tied, SparseTiling({6}, 2), 2);
  EXPECT_EQ(picked.tile_indices, (std::vector<std::uint16_t>{1, 2}));
}

TEST(SparseTopk, BytesRoundTripAndCountOnlyWhatIsSent) {
  const SparseTiling tiling({64, 128}, 64);  // 2 tiles of 4096: 64 indices of 12 bits and 64 codes each
  std::vector<float> values(tiling.numel());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i)) * (1 + i % 5);
  for (const int bits : {2, 4}) {
    const SparseContribution sent = sparse_compress(values.data(), tiling, bits);
    const std::size_t bytes = sparse_encoded_bytes(tiling, bits);
    EXPECT_EQ(bytes, 4u * (1 + (1u << bits)) + 2 * ((64 * (12 + bits) + 7) / 8));
    std::vector<std::uint8_t> wire(bytes);
    sparse_encode(sent, tiling, bits, wire.data());
    const SparseContribution back = sparse_decode(wire.data(), wire.size(), tiling, bits);
    EXPECT_EQ(back.tile_indices, sent.tile_indices);
    EXPECT_EQ(back.codes, sent.codes);
    EXPECT_EQ(back.lookup, sent.lookup);
    EXPECT_EQ(back.shift, sent.shift);
  }
  // Against the dense fp32 exchange of the same tensor: 32 KiB for 8,192 values, ~126x less at 2 bits.
  EXPECT_GT(4.0 * tiling.numel() / static_cast<double>(sparse_encoded_bytes(tiling, 2)), 120.0);
}

TEST(SparseTopk, ContributionsNoHonestReplicaSendsAreRefused) {
  const SparseTiling tiling({8, 8}, 4);  // one tile of 64: indices of 6 bits
  std::vector<float> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.0f;
  const SparseContribution sent = sparse_compress(values.data(), tiling, 2);
  std::vector<std::uint8_t> wire(sparse_encoded_bytes(tiling, 2));
  auto refused = [&](SparseContribution bad, const std::string& text) {
    std::vector<std::uint8_t> bytes(wire.size());
    sparse_encode(bad, tiling, 2, bytes.data());
    try {
      sparse_decode(bytes.data(), bytes.size(), tiling, 2);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  SparseContribution duplicated = sent;
  duplicated.tile_indices[1] = duplicated.tile_indices[0];
  refused(duplicated, "out of ascending order");
  SparseContribution unsorted = sent;
  std::swap(unsorted.tile_indices[0], unsorted.tile_indices[1]);
  refused(unsorted, "out of ascending order");
  SparseContribution not_a_number = sent;
  not_a_number.lookup[2] = std::nanf("");
  refused(not_a_number, "NaN");
  SparseContribution infinite = sent;
  infinite.shift = INFINITY;
  refused(infinite, "NaN or infinity");
  sparse_encode(sent, tiling, 2, wire.data());
  EXPECT_THROW(sparse_decode(wire.data(), wire.size() - 1, tiling, 2), CommError);
  // A tile of 48 values numbers them in 6 bits: 48..63 fit the field but lie outside the tile.
  const SparseTiling short_tile({48}, 2);
  std::vector<float> piece(48, 1.0f);
  SparseContribution outside = sparse_compress(piece.data(), short_tile, 2);
  outside.tile_indices = {3, 50};
  std::vector<std::uint8_t> bytes(sparse_encoded_bytes(short_tile, 2));
  sparse_encode(outside, short_tile, 2, bytes.data());
  EXPECT_THROW(sparse_decode(bytes.data(), bytes.size(), short_tile, 2), CommError);
}

}  // namespace
}  // namespace loco::comm
