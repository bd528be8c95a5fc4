// The tokenizer of `loco export`, read by Hugging Face's tokenizers.js (tests/reference/hf_tokenizer_encode.mjs):
// it must give the ids loco's own tokenizer gives, BOS first, and decode them back to the text (note
// "hf-tokenizer" in src/loco/data/hf_tokenizer.h). scripts/setup.sh fetches tokenizers.js with npm; without it
// the test is skipped.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "loco/data/tokenizer.h"
#include "support/test_support.h"

namespace loco {
namespace {

namespace fs = std::filesystem;
using test::run_loco;

// Texts where the two could part: spaces (sentencepiece's "▁"), newlines and tabs, characters outside the
// vocabulary (byte fallback), control bytes, emoji, CJK, a long run of one letter, and a few KB of prose.
std::vector<std::string> texts() {
  std::vector<std::string> all{"",
                               " ",
                               "  two  spaces\tand a tab\n\nnew paragraph ",
                               "The jury said the laws are old.",
                               "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE2\x80\x9Cquoted\xE2\x80\x9D x\xC2\xB2",
                               "\xF0\x9F\x98\x80 \xE6\xBC\xA2\xE5\xAD\x97\xE3\x81\xAE text",
                               "\x01\x7F control bytes",
                               std::string(300, 'e')};
  // Pieces of the documentation, the BPE test's corpus.
  const std::string docs = test::read_text(fs::path(LOCO_SOURCE_DIR) / "docs/architecture.md");
  auto character_start = [&](std::size_t at) {
    while ((static_cast<unsigned char>(docs[at]) & 0xC0) == 0x80) ++at;
    return at;
  };
  for (std::size_t begin = 0; begin + 1600 < docs.size() && all.size() < 40; begin += 1777) {
    const std::size_t from = character_start(begin);
    all.push_back(docs.substr(from, character_start(from + 200 + begin % 1300) - from));
  }
  return all;
}

// Trains a two-step model on `data` and exports it into DIR/hf.
fs::path export_model(const test::ScratchDir& dir, const fs::path& data) {
  test::write_text(dir / "run.toml", test::tiny_model_toml(data.string()) +
                                         fmt::format("[train]\nsteps = 2\nbatch_size = 2\nthreads = 1\n"
                                                     "checkpoint_every = 2\nout_dir = \"{}\"\n",
                                                     (dir / "run").string()));
  auto r = run_loco({"train", "--config", (dir / "run.toml").string()});
  if (r.exit_code != 0) throw std::runtime_error("loco train failed:\n" + r.output);
  r = run_loco({"export", "--checkpoint", (dir / "run/checkpoints/step_2").string(), "--out", (dir / "hf").string()});
  if (r.exit_code != 0) throw std::runtime_error("loco export failed:\n" + r.output);
  return dir / "hf";
}

void expect_hugging_face_reads_it_as_loco(const test::ScratchDir& dir, const fs::path& data) {
  const fs::path hf = export_model(dir, data);
  EXPECT_FALSE(fs::exists(hf / "tokenizer.json") &&
               nlohmann::json::parse(test::read_text(hf / "tokenizer.json")).contains("kind"))
      << "loco's own tokenizer.json, which Hugging Face cannot read, is in the export";
  const std::vector<std::string> all = texts();
  test::write_text(dir / "texts.json", nlohmann::json(all).dump());
  const std::string command =
      fmt::format("node {}/tests/reference/hf_tokenizer_encode.mjs {} {} {} {}", LOCO_SOURCE_DIR, LOCO_TOKENIZERS_JS,
                  hf.string(), (dir / "texts.json").string(), (dir / "hf_ids.json").string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto hugging_face = nlohmann::json::parse(test::read_text(dir / "hf_ids.json"));
  const auto tokenizer = data::load_tokenizer(data);
  ASSERT_EQ(hugging_face.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string& text = all[i];
    std::vector<std::uint32_t> ids{tokenizer->bos_id()};
    for (std::uint32_t id : tokenizer->encode(text)) ids.push_back(id);
    EXPECT_EQ(hugging_face[i].at("ids").get<std::vector<std::uint32_t>>(), ids) << "text " << i;
    EXPECT_EQ(hugging_face[i].at("text").get<std::string>(), text) << "text " << i;
  }
}

bool tokenizers_js_fetched() {
  return fs::exists(LOCO_TOKENIZERS_JS) && std::system("node --version >/dev/null 2>&1") == 0;
}

// On loco's own documentation: prose, tables, code and symbols, enough merges that their order matters (with
// the merges in reverse order, this test fails).
TEST(HfTokenizerReference, HuggingFaceEncodesAsLocoWithTheBpeTokenizer) {
  if (!tokenizers_js_fetched()) GTEST_SKIP() << "tokenizers.js was not fetched by scripts/setup.sh (npm)";
  test::ScratchDir dir;
  fs::create_directories(dir / "text");
  for (const auto& entry : fs::directory_iterator(fs::path(LOCO_SOURCE_DIR) / "docs")) {
    if (entry.path().extension() == ".md") fs::copy_file(entry.path(), dir / "text" / entry.path().filename());
  }
  const auto r = run_loco({"prepare", "--input", (dir / "text").string(), "--out", (dir / "data").string(),
                           "--vocab-size", "1000", "--val-fraction", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_hugging_face_reads_it_as_loco(dir, dir / "data");
}

TEST(HfTokenizerReference, HuggingFaceEncodesAsLocoWithTheByteTokenizer) {
  if (!tokenizers_js_fetched()) GTEST_SKIP() << "tokenizers.js was not fetched by scripts/setup.sh (npm)";
  test::ScratchDir dir;
  test::prepare_tiny_byte_data(dir.path());
  expect_hugging_face_reads_it_as_loco(dir, dir / "data");
}

}  // namespace
}  // namespace loco
