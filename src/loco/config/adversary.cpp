#include "loco/config/adversary.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <regex>

#include "loco/util/error.h"
#include "loco/util/parse_number.h"

namespace loco {

std::optional<AdversarySpec> parse_adversary(const std::string& text, std::int64_t replicas) {
  if (text.empty()) return std::nullopt;
  static const std::regex form(R"(\s*([0-9]{1,6})@([0-9]{1,12}):(noise|nan|scale=(\S+))\s*)");
  std::smatch m;
  const auto refuse = [&](const std::string& why) {
    return ConfigError(fmt::format("dist.adversary = \"{}\": {}. Forms: \"R@S:scale=F\" (replica R sends F times "
                                   "its pseudo-gradient after step S; F = -1 flips its sign) or \"R@S:noise\" "
                                   "(noise of the same norm) or \"R@S:nan\"",
                                   text, why));
  };
  if (!std::regex_match(text, m, form)) throw refuse("not understood");
  AdversarySpec spec;
  spec.replica = std::stoi(m[1]);
  spec.from_step = std::stoll(m[2]);
  if (spec.replica >= replicas) {
    throw refuse(fmt::format("replica {} does not exist (dist.replicas = {}; replicas count from 0)", spec.replica,
                             replicas));
  }
  if (m[3] == "noise" || m[3] == "nan") {
    spec.kind = m[3] == "noise" ? AdversarySpec::Kind::noise : AdversarySpec::Kind::nan;
    return spec;
  }
  const std::optional<double> factor = parse_whole_number(m[4].str());
  if (!factor) throw refuse(fmt::format("the factor '{}' is not a finite number", m[4].str()));
  // Pseudo-gradients are float32: a factor beyond its range is an infinity, which the "nan" form stands for.
  if (std::abs(*factor) > std::numeric_limits<float>::max()) {
    throw refuse(
        fmt::format("the factor {} is beyond float32's range (±{:g}); use the nan form for values that are "
                    "not finite",
                    m[4].str(), std::numeric_limits<float>::max()));
  }
  spec.factor = *factor;
  return spec;
}

}  // namespace loco
