#include "loco/comm/link/round_size.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loco/util/error.h"
#include "loco/util/round_kib.h"

namespace loco::comm {

namespace {

// The auto rule's constants (round_size.h).
constexpr double kRoundSeconds = 0.008;
constexpr std::int64_t kMinRoundBytes = 4 * 1024;

}  // namespace

std::optional<LinkSpec> link_for_rounds(const LinkModel& link, const std::optional<LinkSpec>& measured) {
  if (link.slowest_bandwidth_bps() > 0) return LinkSpec{link.slowest_bandwidth_bps(), link.highest_latency_s()};
  if (measured && measured->bandwidth_bps > 0 && std::isfinite(measured->bandwidth_bps)) return measured;
  return std::nullopt;
}

RoundSize RoundSize::parse(const std::string& text, const std::string& key) {
  if (text == "auto") return {Mode::automatic, 0};
  if (text == "off") return {Mode::whole, 0};
  const auto bytes = round_kib_bytes(text);
  if (!bytes) throw ConfigError(round_kib_error(key, text));
  if (*bytes == 0) return {Mode::whole, 0};
  return {Mode::fixed, *bytes};
}

std::string RoundSize::describe() const {
  switch (mode) {
    case Mode::whole: return "off";
    case Mode::automatic: return "auto";
    case Mode::fixed: break;
  }
  return fmt::format("{:g} KiB", static_cast<double>(bytes) / 1024);
}

std::int64_t round_bytes_per_peer(const RoundSize& setting, const LinkModel& link, int group_size,
                                  const std::optional<LinkSpec>& measured) {
  switch (setting.mode) {
    case RoundSize::Mode::whole: return 0;
    case RoundSize::Mode::fixed: return setting.bytes;
    case RoundSize::Mode::automatic: break;
  }
  const auto spec = link_for_rounds(link, measured);
  if (!spec || group_size < 2) return 0;
  const double round_s = std::max(kRoundSeconds, spec->latency_s / (kMaxRoundsInFlight - 1));
  const double per_peer = spec->bandwidth_bps / 8 * round_s / (group_size - 1);
  // A measured loopback link can be absurdly fast; a round of 1 GiB is one round in practice anyway.
  constexpr double kMaxRoundBytes = 1 << 30;
  return std::max(kMinRoundBytes, static_cast<std::int64_t>(std::min(per_peer, kMaxRoundBytes)));
}

int rounds_in_flight(const RoundSize& setting, const LinkModel& link, int group_size,
                     const std::optional<LinkSpec>& measured) {
  const std::int64_t round_bytes = round_bytes_per_peer(setting, link, group_size, measured);
  const auto spec = link_for_rounds(link, measured);
  if (round_bytes == 0 || !spec || !(spec->latency_s > 0) || group_size < 2) return 1;
  const double round_s = 8.0 * static_cast<double>(round_bytes) * (group_size - 1) / spec->bandwidth_bps;
  const double covering = 1 + std::ceil(spec->latency_s / round_s);
  return static_cast<int>(std::min<double>(kMaxRoundsInFlight, covering));
}

}  // namespace loco::comm
