#include "loco/util/round_kib.h"

#include <fmt/format.h>

#include <cmath>

#include "loco/util/parse_number.h"

namespace loco {

std::optional<std::int64_t> round_kib_bytes(const std::string& text) {
  const auto kib = parse_whole_number(text);
  if (!kib || *kib < 0 || *kib * 1024 > kMostRoundBytes) return std::nullopt;
  const auto bytes = static_cast<std::int64_t>(std::llround(*kib * 1024));
  if (*kib > 0 && *kib * 1024 < 1) return std::nullopt;
  return bytes;
}

std::string round_kib_error(const std::string& key, const std::string& text) {
  return fmt::format(
      "{} '{}' is not a round size: give auto (sized from the link), off (one round) or a size in "
      "KiB per peer and round, from 1 byte (0.0009765625) to {:.0f} KiB, e.g. 32",
      key, text, kMostRoundBytes / 1024);
}

}  // namespace loco
