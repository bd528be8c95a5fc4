#include "loco/util/parse_number.h"

#include <cmath>
#include <stdexcept>

namespace loco {

std::optional<LeadingNumber> parse_leading_number(const std::string& text) {
  LeadingNumber number;
  try {
    number.value = std::stod(text, &number.used);
  } catch (const std::exception&) {  // no number at all, or out of double's range
    return std::nullopt;
  }
  if (number.used == 0 || !std::isfinite(number.value)) return std::nullopt;
  return number;
}

std::optional<double> parse_whole_number(const std::string& text) {
  const auto number = parse_leading_number(text);
  if (!number || number->used != text.size()) return std::nullopt;
  return number->value;
}

}  // namespace loco
