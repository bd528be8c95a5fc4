// A small CSV reader for result tables: comma-separated, optional double quotes around a field
// ("" inside quotes is a quote), blank lines and lines starting with # skipped, whitespace around
// fields trimmed. No multi-line fields.
#pragma once

#include <string>
#include <vector>

namespace loco::sim {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as the header
  std::vector<int> line_numbers;               // 1-based line of each row, for messages
};

// Throws DataError naming `source` and the line for an empty file, a row with the wrong number of
// fields, or an unterminated quote.
CsvTable parse_csv(const std::string& text, const std::string& source);

}  // namespace loco::sim
