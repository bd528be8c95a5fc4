#include "loco/util/parse_number.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "loco/util/error.h"

namespace loco {

std::optional<LeadingNumber> parse_leading_number(const std::string& text) {
  // strtod, not stod: stod throws on a number below double's normal range (1e-320), which is still a number;
  // one above it comes back infinite and is refused below.
  const char* begin = text.c_str();
  char* end = nullptr;
  LeadingNumber number;
  number.value = std::strtod(begin, &end);
  number.used = static_cast<std::size_t>(end - begin);
  if (number.used == 0 || !std::isfinite(number.value)) return std::nullopt;
  // Decimal only: strtod also reads hexadecimal (0x10, 0x1p30), which no user means by a size or a loss.
  const std::string_view taken(begin, number.used);
  if (taken.find_first_not_of(" \t\n\v\f\r+-.0123456789eE") != std::string_view::npos) return std::nullopt;
  return number;
}

std::optional<double> parse_whole_number(const std::string& text) {
  const auto number = parse_leading_number(text);
  if (!number || number->used != text.size()) return std::nullopt;
  return number->value;
}

std::vector<double> parse_per_rank_values(const std::string& text, const char* what, int world_size) {
  std::vector<double> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto value = parse_whole_number(item);
    if (!value || *value < 0) {
      throw ConfigError(
          fmt::format("{} '{}': '{}' is not a number ≥ 0. Give one value for all ranks or "
                      "one per rank, separated by commas (e.g. 100 or 100,100,10).",
                      what, text, item));
    }
    values.push_back(*value);
  }
  if (values.size() > 1 && static_cast<int>(values.size()) != world_size) {
    throw ConfigError(
        fmt::format("{} '{}' lists {} values for {} ranks. Give one value for all ranks or "
                    "exactly one per rank.",
                    what, text, values.size(), world_size));
  }
  return values;
}

}  // namespace loco
