// SparseLoCo's compression (comm/codecs/sparse_topk.h, note "sparse-topk") against its Python transcription
// (tests/reference/sparseloco_ref.py; fixture written by tests/reference/make_sparseloco_fixture.py): two
// rounds of error feedback for 2 and 3 replicas, 2- and 4-bit codes, 2-D
// tensors in 64-wide and odd tiles, 1-D and prime lengths. A flipped sign, a dropped residual, a wrong tile or
// a tie broken the other way changes the indices, codes or accumulators compared here.
// The wire format (Elias-Fano indices) is checked byte by byte on a hand-computed tile, round-tripped for
// every kind of tile, and attacked with hand-made and random bytes.
#include "loco/comm/codecs/sparse_topk.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
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

// The mean and the outer step on these contributions: tests/torch/sparse_exchange_test.cpp, through the exchange.
TEST(SparseTopk, ErrorFeedbackMatchesThePythonTranscription) {
  const SparseFixture fixture;
  for (const auto& [name, c] : fixture.cases().items()) {
    const int bits = c.at("bits");
    const auto k = c.at("k").get<std::size_t>();
    const float beta = c.at("beta").get<float>();
    const int replicas = c.at("replicas");
    for (const auto& [tensor, shape] : c.at("shapes").items()) {
      const SparseTiling tiling(shape.get<std::vector<std::int64_t>>(), k);
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
  // 2 tiles of 4096 at k = 64: L = 6, an upper string of 64 + 4096 / 64 = 128 bits, 64 low parts of 6 bits and
  // 64 codes: 8 bits per index (the reference packs 12).
  const SparseTiling tiling({64, 128}, 64);
  EXPECT_EQ(sparse_bits_per_index(tiling), 8.0);
  std::vector<float> values(tiling.numel());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i)) * (1 + i % 5);
  for (const int bits : {2, 4}) {
    const SparseContribution sent = sparse_compress(values.data(), tiling, bits);
    const std::size_t bytes = sparse_encoded_bytes(tiling, bits);
    EXPECT_EQ(bytes, 4u * (1 + (1u << bits)) + 2 * ((128 + 64 * (6 + bits)) / 8));  // 80 or 96 bytes a tile
    std::vector<std::uint8_t> wire(bytes);
    sparse_encode(sent, tiling, bits, wire.data());
    const SparseContribution back = sparse_decode(wire.data(), wire.size(), tiling, bits);
    EXPECT_EQ(back.tile_indices, sent.tile_indices);
    EXPECT_EQ(back.codes, sent.codes);
    EXPECT_EQ(back.lookup, sent.lookup);
    EXPECT_EQ(back.shift, sent.shift);
  }
  // Against the dense fp32 exchange of the same tensor (32 KiB for 8,192 values) at 2 bits: 80 bytes a tile
  // for 16 KiB of values (204.8x); with the 20 header bytes 180 bytes in all (182x; 244 and 134x at 12 bits).
  const std::size_t header = 4 * (1 + 4);
  EXPECT_EQ(sparse_encoded_bytes(tiling, 2), 180u);
  EXPECT_GT(4.0 * tiling.numel() / static_cast<double>(sparse_encoded_bytes(tiling, 2) - header), 200.0);
  EXPECT_GT(4.0 * tiling.numel() / static_cast<double>(sparse_encoded_bytes(tiling, 2)), 180.0);
  // k = 32 of 4096: L = 7, 32 + 32 upper bits and 32 x 7 low bits, 288 bits, 9 bits per index.
  const SparseTiling half({64, 64}, 32);
  EXPECT_EQ(sparse_bits_per_index(half), 9.0);
  EXPECT_EQ(sparse_encoded_bytes(half, 2), header + (288 + 32 * 2) / 8);
  // n / k < 2: no low bits, an upper string of k + n bits.
  const SparseTiling dense({3}, 2);
  EXPECT_EQ(sparse_bits_per_index(dense), 2.5);
  EXPECT_EQ(sparse_encoded_bytes(dense, 2), header + 2);  // 5 + 2 x 2 bits
}

// An 8 x 8 tile at k = 4: L = 4, an upper string of 4 + 64 / 16 = 8 bits, then 4 low parts of 4 bits and 4
// codes of 2 bits: 4 bytes after the 20 of shift and lookup. Indices 3, 17, 18, 60 have high parts 0, 1, 1, 3
// (bits 0, 2, 3, 6 of the string: 0x4d) and low parts 3, 1, 2, 12 (0x13, 0xc2); codes 0, 1, 2, 3 are 0xe4.
const SparseTiling kSmall({8, 8}, 4);
constexpr std::size_t kHeader = 4 * (1 + 4);

SparseContribution small_contribution() {
  SparseContribution c;
  c.tile_indices = {3, 17, 18, 60};
  c.codes = {0, 1, 2, 3};
  c.lookup = {-1.5f, -0.5f, 0.5f, 1.5f};
  c.shift = 0.25f;
  return c;
}

TEST(SparseTopk, WireLayoutIsEliasFanoThenLowPartsThenCodes) {
  ASSERT_EQ(sparse_encoded_bytes(kSmall, 2), kHeader + 4);
  std::vector<std::uint8_t> wire(sparse_encoded_bytes(kSmall, 2), 0xff);
  const SparseContribution c = small_contribution();
  sparse_encode(c, kSmall, 2, wire.data());
  float shift = 0;
  std::memcpy(&shift, wire.data(), 4);
  EXPECT_EQ(shift, 0.25f);
  EXPECT_EQ(std::vector<std::uint8_t>(wire.begin() + kHeader, wire.end()),
            (std::vector<std::uint8_t>{0x4d, 0x13, 0xc2, 0xe4}));
  const SparseContribution back = sparse_decode(wire.data(), wire.size(), kSmall, 2);
  EXPECT_EQ(back.tile_indices, c.tile_indices);
  EXPECT_EQ(back.codes, c.codes);
  EXPECT_EQ(back.lookup, c.lookup);
}

// Any ascending set of indices, in tiles of every kind (n / k below 2, a power of two, neither; 1-D and a
// prime length; first and last index; all indices), comes back as sent, in the same number of bytes.
TEST(SparseTopk, AnyAscendingIndicesRoundTrip) {
  std::mt19937 random(7);
  const std::vector<std::pair<std::vector<std::int64_t>, std::size_t>> cases = {
      {{64, 128}, 64}, {{64, 64}, 32}, {{64, 64}, 4096}, {{40, 30}, 63}, {{96}, 2}, {{7}, 64},
      {{1}, 1},        {{3}, 2},       {{13, 17}, 100},  {{8, 8}, 4},   {{128}, 30}, {{6}, 6}};
  for (const auto& [shape, k_wanted] : cases) {
    const SparseTiling tiling(shape, k_wanted);
    for (const int bits : {2, 4}) {
      for (int round = 0; round < 20; ++round) {
        SparseContribution c;
        std::vector<std::uint16_t> all(tiling.tile_size());
        std::iota(all.begin(), all.end(), std::uint16_t{0});
        for (std::size_t t = 0; t < tiling.tiles(); ++t) {
          std::shuffle(all.begin(), all.end(), random);
          std::vector<std::uint16_t> chosen(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(tiling.k()));
          if (round == 0) {  // the extremes: 0 and n - 1 where k allows
            chosen.clear();
            for (std::size_t i = 0; i < tiling.k(); ++i) chosen.push_back(static_cast<std::uint16_t>(i));
            if (tiling.k() > 1) chosen.back() = static_cast<std::uint16_t>(tiling.tile_size() - 1);
          }
          std::sort(chosen.begin(), chosen.end());
          c.tile_indices.insert(c.tile_indices.end(), chosen.begin(), chosen.end());
        }
        for (std::size_t i = 0; i < tiling.selected(); ++i) c.codes.push_back(static_cast<std::uint8_t>(random() % (1u << bits)));
        c.lookup.assign(std::size_t{1} << bits, 0.5f);
        std::vector<std::uint8_t> wire(sparse_encoded_bytes(tiling, bits));
        sparse_encode(c, tiling, bits, wire.data());
        const SparseContribution back = sparse_decode(wire.data(), wire.size(), tiling, bits);
        ASSERT_EQ(back.tile_indices, c.tile_indices) << tiling.tile_size() << " k " << tiling.k();
        ASSERT_EQ(back.codes, c.codes) << tiling.tile_size() << " k " << tiling.k();
      }
    }
  }
}

// Hostile bytes, each a change to the honest 8 x 8 encoding above (or of a 48-value tile): refused with the
// problem named.
void expect_refused(const std::vector<std::uint8_t>& bytes, const SparseTiling& tiling, const std::string& text) {
  try {
    sparse_decode(bytes.data(), bytes.size(), tiling, 2);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(SparseTopk, ContributionsNoHonestReplicaSendsAreRefused) {
  std::vector<std::uint8_t> honest(sparse_encoded_bytes(kSmall, 2));
  sparse_encode(small_contribution(), kSmall, 2, honest.data());
  ASSERT_NO_THROW(sparse_decode(honest.data(), honest.size(), kSmall, 2));
  auto changed = [&](std::size_t at, std::uint8_t value) {
    std::vector<std::uint8_t> bytes = honest;
    bytes[kHeader + at] = value;
    return bytes;
  };
  // The upper string holds k = 4 set bits: one more (bit 7), one fewer (bit 6 cleared), none.
  expect_refused(changed(0, 0x4d | 0x80), kSmall, "tile 0 sets 5 of its 8 upper index bits where it sends 4");
  expect_refused(changed(0, 0x4d & ~0x40), kSmall, "tile 0 sets 3 of its 8 upper index bits where it sends 4");
  expect_refused(changed(0, 0x00), kSmall, "sets 0 of its 8 upper index bits");
  // Indices 17 and 18 share high part 1: low parts 1 then 1 are 17 twice, 1 then 0 go down to 16.
  expect_refused(changed(2, 0xc1), kSmall, "tile 0 holds index 17 out of ascending order");
  expect_refused(changed(2, 0xc0), kSmall, "tile 0 holds index 16 out of ascending order");
  // Four set bits, the last at 7: high part 7 - 3 = 4, index 4 x 16 + 12 = 76 of a 64-value tile.
  expect_refused(changed(0, 0x8d), kSmall, "tile 0 holds index 76 outside the tile");
  // A tile of 48 values at k = 4: L = 3, an upper string of 4 + 6 bits. Indices 3, 17, 18, 40 set bits 0, 3, 4
  // and 8; moving the last to bit 9 makes its high part 6, index 48.
  const SparseTiling short_tile({48}, 4);
  ASSERT_EQ(short_tile.tile_size(), 48u);
  SparseContribution c = small_contribution();
  c.tile_indices = {3, 17, 18, 40};
  std::vector<std::uint8_t> bytes(sparse_encoded_bytes(short_tile, 2));
  ASSERT_EQ(bytes.size(), kHeader + 4);  // 10 + 12 + 8 bits
  sparse_encode(c, short_tile, 2, bytes.data());
  ASSERT_EQ(bytes[kHeader], 0x19);
  ASSERT_EQ(bytes[kHeader + 1] & 0x03, 0x01);
  EXPECT_EQ(sparse_decode(bytes.data(), bytes.size(), short_tile, 2).tile_indices, c.tile_indices);
  bytes[kHeader + 1] ^= 0x03;
  expect_refused(bytes, short_tile, "tile 0 holds index 48 outside the tile");
  // Values that are not numbers, and wrong sizes.
  const float nan = std::nanf("");
  const float infinity = INFINITY;
  std::vector<std::uint8_t> not_a_number = honest;
  std::memcpy(not_a_number.data() + 4 * (1 + 2), &nan, 4);  // lookup[2]
  expect_refused(not_a_number, kSmall, "NaN");
  std::vector<std::uint8_t> infinite = honest;
  std::memcpy(infinite.data(), &infinity, 4);  // shift
  expect_refused(infinite, kSmall, "NaN or infinity");
  expect_refused(std::vector<std::uint8_t>(honest.begin(), honest.end() - 1), kSmall,
                 "of 23 bytes where its tensor's takes 24");
  std::vector<std::uint8_t> longer = honest;
  longer.push_back(0);
  expect_refused(longer, kSmall, "of 25 bytes where its tensor's takes 24");
}

// Whatever the bytes, the decoder refuses them or returns indices inside the tile and strictly ascending
// (every bit it reads lies inside the buffer: run under a sanitizer to check that too).
TEST(SparseTopk, ArbitraryBytesAreRefusedOrDecodeToValidIndices) {
  std::mt19937 random(11);
  const std::vector<SparseTiling> tilings = {kSmall, SparseTiling({48}, 4), SparseTiling({3}, 2),
                                             SparseTiling({40, 30}, 63), SparseTiling({64, 64}, 64)};
  std::size_t accepted = 0;
  std::size_t refused = 0;
  for (const SparseTiling& tiling : tilings) {
    std::vector<float> values(tiling.numel());
    for (float& v : values) v = static_cast<float>(random() % 1000) / 100.0f - 5.0f;
    std::vector<std::uint8_t> honest(sparse_encoded_bytes(tiling, 2));
    sparse_encode(sparse_compress(values.data(), tiling, 2), tiling, 2, honest.data());
    for (int round = 0; round < 2000; ++round) {
      std::vector<std::uint8_t> bytes = honest;
      if (round % 2 == 0) {  // a few flipped bits in the tiles
        for (int f = 0; f <= round % 5; ++f) {
          const std::size_t bit = kHeader * 8 + random() % ((bytes.size() - kHeader) * 8);
          bytes[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
        }
      } else {  // random tiles
        for (std::size_t i = kHeader; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(random());
      }
      try {
        const SparseContribution back = sparse_decode(bytes.data(), bytes.size(), tiling, 2);
        ++accepted;
        ASSERT_EQ(back.tile_indices.size(), tiling.selected());
        for (std::size_t i = 0; i < back.tile_indices.size(); ++i) {
          ASSERT_LT(back.tile_indices[i], tiling.tile_size());
          if (i % tiling.k() > 0) {
            ASSERT_GT(back.tile_indices[i], back.tile_indices[i - 1]);
          }
        }
      } catch (const CommError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(accepted, 0u);  // flips of codes, low parts and padding pass; most others do not
  EXPECT_GT(refused, 0u);
}

// The selection as a plain sort: larger |e| first, NaN before any number, ties to the lower index.
std::vector<std::uint16_t> selected_by_sorting(const float* values, const SparseTiling& tiling) {
  std::vector<std::uint16_t> out;
  for (std::size_t t = 0; t < tiling.tiles(); ++t) {
    std::vector<std::pair<float, std::uint16_t>> tile;
    for (std::size_t j = 0; j < tiling.tile_size(); ++j) {
      const float m = std::fabs(values[tiling.flat_index(t, j)]);
      tile.emplace_back(std::isnan(m) ? INFINITY : m, static_cast<std::uint16_t>(j));
    }
    std::stable_sort(tile.begin(), tile.end(), [&](const auto& a, const auto& b) {
      const bool a_nan = std::isnan(std::fabs(values[tiling.flat_index(t, a.second)]));
      const bool b_nan = std::isnan(std::fabs(values[tiling.flat_index(t, b.second)]));
      if (a_nan != b_nan) return a_nan;
      return a.first > b.first;
    });
    std::vector<std::uint16_t> chosen;
    for (std::size_t i = 0; i < tiling.k(); ++i) chosen.push_back(tile[i].second);
    std::sort(chosen.begin(), chosen.end());
    out.insert(out.end(), chosen.begin(), chosen.end());
  }
  return out;
}

TEST(SparseTopk, SelectionMatchesAFullSortWithManyTiesAndNaNs) {
  std::mt19937 random(3);
  const float nan = std::nanf("");
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{64, 128}, {40, 30}, {97}, {8, 8}}) {
    for (const std::size_t k : {2, 6, 64, 1000}) {
      const SparseTiling tiling(shape, k);
      std::vector<float> values(tiling.numel());
      for (float& v : values) {  // few distinct magnitudes of both signs, infinities and a few NaNs
        const unsigned draw = random() % 100;
        v = draw < 3 ? nan : draw < 5 ? -INFINITY : static_cast<float>(static_cast<int>(draw % 7) - 3);
      }
      EXPECT_EQ(sparse_compress(values.data(), tiling, 2).tile_indices, selected_by_sorting(values.data(), tiling))
          << tiling.tile_size() << " k " << tiling.k();
    }
  }
  // More NaNs than k: the lowest-index NaNs.
  const float some_nans[] = {1.0f, nan, 5.0f, nan, nan, 2.0f};
  EXPECT_EQ(sparse_compress(some_nans, SparseTiling({6}, 2), 2).tile_indices, (std::vector<std::uint16_t>{1, 3}));
}

// A replica that diverged: its NaN is selected, its statistics become NaN, and receivers refuse what it sends.
TEST(SparseTopk, ANaNIsSelectedAndItsContributionRefused) {
  std::vector<float> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 9) - 4.0f;
  values[10] = std::nanf("");
  const SparseContribution sent = sparse_compress(values.data(), kSmall, 2);
  ASSERT_EQ(sent.tile_indices.size(), 4u);
  EXPECT_NE(std::find(sent.tile_indices.begin(), sent.tile_indices.end(), 10), sent.tile_indices.end());
  EXPECT_TRUE(std::isnan(sent.shift));
  std::vector<std::uint8_t> wire(sparse_encoded_bytes(kSmall, 2));
  sparse_encode(sent, kSmall, 2, wire.data());
  expect_refused(wire, kSmall, "NaN or infinity");
}

}  // namespace
}  // namespace loco::comm
