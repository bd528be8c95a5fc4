#include "loco/sim/csv.h"

#include <algorithm>
#include <sstream>
#include <string_view>

#include "loco/util/error.h"

namespace loco::sim {

namespace {

std::string trim(const std::string& s) {
  auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

std::vector<std::string> split_line(const std::string& line, const std::string& source, int number) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(trim(field));
      field.clear();
    } else {
      field += c;
    }
  }
  if (quoted) {
    throw DataError(fmt::format("{} line {}: a quoted field is not closed; fix the quotes.", source, number));
  }
  fields.push_back(trim(field));
  return fields;
}

}  // namespace

CsvTable parse_csv(const std::string& text, const std::string& source) {
  CsvTable table;
  // A NUL is no character of a text file, and it would cut every message that quotes its field.
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    throw DataError(fmt::format("{} line {} holds a NUL byte: it is not a text CSV. Save it as plain text.", source,
                                1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n')));
  }
  // Spreadsheets save UTF-8 with a byte-order mark, which would become part of the first column's name.
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  std::istringstream stream(
      text.compare(0, kByteOrderMark.size(), kByteOrderMark) == 0 ? text.substr(kByteOrderMark.size()) : text);
  int number = 0;
  for (std::string line; std::getline(stream, line);) {
    ++number;
    std::string content = trim(line);
    if (content.empty() || content[0] == '#') continue;
    auto fields = split_line(line, source, number);
    if (table.header.empty()) {
      table.header = fields;
      continue;
    }
    if (fields.size() != table.header.size()) {
      throw DataError(
          fmt::format("{} line {}: {} fields where the header has {}; every row needs one "
                      "value per column (leave optional ones empty).",
                      source, number, fields.size(), table.header.size()));
    }
    table.rows.push_back(fields);
    table.line_numbers.push_back(number);
  }
  if (table.header.empty()) {
    throw DataError(
        fmt::format("{} is empty; a results CSV needs a header line such as "
                    "params,replicas,loss.",
                    source));
  }
  return table;
}

}  // namespace loco::sim
