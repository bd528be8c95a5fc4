#include "support/table_fixtures.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "loco/data/dataset_meta.h"
#include "support/test_support.h"

namespace loco::test {

namespace fs = std::filesystem;

std::vector<std::optional<std::string>> table_fixture_texts(const fs::path& fixture_dir) {
  std::ifstream in(fixture_dir / "texts.json");
  std::vector<std::optional<std::string>> texts;
  for (const auto& value : nlohmann::json::parse(in)) {
    texts.push_back(value.is_null() ? std::nullopt : std::optional<std::string>(value.get<std::string>()));
  }
  return texts;
}

fs::path expect_prepared_like_json_lines(const fs::path& scratch, const std::vector<std::optional<std::string>>& texts,
                                         const fs::path& table_input) {
  std::string jsonl;
  for (const auto& text : texts) jsonl += (text ? nlohmann::json{{"text", *text}}.dump() : "") + "\n";
  write_text(scratch / "lines/docs.jsonl", jsonl);
  data::PrepareOptions options;
  options.tokenizer = "bpe";
  options.vocab_size = 300;
  options.val_fraction = 0.1;
  for (const fs::path& input : {scratch / "lines", table_input}) {
    options.inputs = {input};
    options.out_dir = scratch / ("from-" + input.filename().string());
    data::prepare_dataset(options);
  }
  const fs::path from_table = scratch / ("from-" + table_input.filename().string());
  EXPECT_EQ(data::read_dataset_meta(scratch / "from-lines").checksums, data::read_dataset_meta(from_table).checksums);
  EXPECT_EQ(read_text(scratch / "from-lines/tokenizer.model"), read_text(from_table / "tokenizer.model"));
  return scratch / "from-lines";
}

}  // namespace loco::test
