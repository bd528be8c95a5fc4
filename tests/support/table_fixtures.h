// What the tests of table corpora (Parquet, Arrow) share: their fixtures' texts, and the check that a table
// prepares to the same shards and tokenizer as JSON Lines of the same rows.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "loco/data/prepare.h"

namespace loco::test {

// A fixture directory's texts.json: the text column, a text per row, null where the row has none.
std::vector<std::optional<std::string>> table_fixture_texts(const std::filesystem::path& fixture_dir);

// Writes `texts` as JSON Lines (a blank line for a null row) to scratch/lines/docs.jsonl and prepares it and
// `table_input` with `options` (a BPE tokenizer of 300 pieces, a tenth held out, unless set): both must give
// the same shards and tokenizer. Returns the JSON Lines' prepared directory.
std::filesystem::path expect_prepared_like_json_lines(const std::filesystem::path& scratch,
                                                      const std::vector<std::optional<std::string>>& texts,
                                                      const std::filesystem::path& table_input);

}  // namespace loco::test
