// Numbers in user input (command-line lists, algorithm specs): std::stod without its exceptions and
// with the checks every caller needs, so that each caller only words its own error message.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace loco {

struct LeadingNumber {
  double value = 0;
  std::size_t used = 0;  // characters of the text the number took
};

// The finite number at the start of `text` (after optional spaces), or nullopt.
std::optional<LeadingNumber> parse_leading_number(const std::string& text);

// `text` as a finite number if it is one and nothing else, or nullopt.
std::optional<double> parse_whole_number(const std::string& text);

}  // namespace loco
