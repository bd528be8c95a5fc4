// Numbers in user input (command-line lists, algorithm specs, per-rank settings): std::stod without its
// exceptions and with the checks every caller needs, so that each caller only words its own error
// message (per-rank lists, which mean the same everywhere, word theirs here).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace loco {

struct LeadingNumber {
  double value = 0;
  std::size_t used = 0;  // characters of the text the number took
};

// The finite decimal number at the start of `text` (after optional spaces), or nullopt (for hexadecimal too).
std::optional<LeadingNumber> parse_leading_number(const std::string& text);

// `text` as a finite number if it is one and nothing else, or nullopt.
std::optional<double> parse_whole_number(const std::string& text);

// A per-rank setting given as one value for all ranks or one per rank, comma-separated ("100" or
// "100,100,10,100"); empty text gives no values. Throws ConfigError naming `what` and the fix when an
// item is not a number ≥ 0 or the count is neither 1 nor `world_size`.
std::vector<double> parse_per_rank_values(const std::string& text, const char* what, int world_size);

}  // namespace loco
