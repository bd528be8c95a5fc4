// The size a round of an exchange is given in (comm.round_kib, `loco bench --round-kib`): KiB per peer and round,
// read by the config's checks (config/dist_checks.cpp) and by the exchanges (comm/link/round_size.h) alike, so
// that what the config accepts is what the exchanges run with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loco {

// A round of more than this (a petabyte) is no round: a whole exchange is far less.
inline constexpr double kMostRoundBytes = 1e15;

// `text` as bytes per peer and round: "32" is 32768, "0.5" is 512, "0" is 0 (one round, as "off"). nullopt for
// text that is no such size: not a number, negative, above kMostRoundBytes, or more than 0 but less than a byte
// (1e-30 was read as one round, silently). A size is rounded to whole bytes.
std::optional<std::int64_t> round_kib_bytes(const std::string& text);

// The refusal of `text` given for `key`, with the forms a round size takes.
std::string round_kib_error(const std::string& key, const std::string& text);

}  // namespace loco
