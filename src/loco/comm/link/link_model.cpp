#include "loco/comm/link/link_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loco/util/parse_number.h"

namespace loco::comm {

namespace {

double value_for(const std::vector<double>& values, int rank) {
  if (values.empty()) return 0;
  return values.size() == 1 ? values[0] : values[static_cast<std::size_t>(rank)];
}

std::string describe_link(const LinkSpec& link) {
  const std::string bandwidth =
      link.bandwidth_bps > 0 ? fmt::format("{:g} Mbit/s", link.bandwidth_bps / 1e6) : "unlimited bandwidth";
  return fmt::format("{}, {:g} ms", bandwidth, link.latency_s * 1e3);
}

}  // namespace

LinkModel::LinkModel(std::vector<LinkSpec> links) : links_(std::move(links)) {}

LinkModel LinkModel::parse(const std::string& bandwidth_mbps, const std::string& latency_ms, int world_size) {
  const auto bandwidths = parse_per_rank_values(bandwidth_mbps, "bandwidth (Mbit/s)", world_size);
  const auto latencies = parse_per_rank_values(latency_ms, "latency (ms)", world_size);
  const int count = std::max(bandwidths.size(), latencies.size()) > 1 ? world_size : 1;
  std::vector<LinkSpec> links;
  for (int rank = 0; rank < count; ++rank) {
    links.push_back({value_for(bandwidths, rank) * 1e6, value_for(latencies, rank) * 1e-3});
  }
  return LinkModel(std::move(links));
}

bool LinkModel::emulates_anything() const {
  return std::any_of(links_.begin(), links_.end(),
                     [](const LinkSpec& link) { return link.bandwidth_bps > 0 || link.latency_s > 0; });
}

const LinkSpec& LinkModel::link_of(int rank) const {
  static const LinkSpec ideal;
  if (links_.empty()) return ideal;
  return links_.size() == 1 ? links_[0] : links_.at(static_cast<std::size_t>(rank));
}

double LinkModel::seconds(const Traffic& traffic, double bandwidth_bps, double latency_s) {
  const double bytes = static_cast<double>(std::max(traffic.bytes_sent, traffic.bytes_recv));
  const double transfer = bandwidth_bps > 0 ? 8.0 * bytes / bandwidth_bps : 0.0;
  return traffic.rounds * latency_s + transfer;
}

double LinkModel::slowest_bandwidth_bps() const {
  double slowest = 0;
  for (const auto& link : links_) {
    if (link.bandwidth_bps > 0 && (slowest == 0 || link.bandwidth_bps < slowest)) slowest = link.bandwidth_bps;
  }
  return slowest;
}

double LinkModel::highest_latency_s() const {
  double highest = 0;
  for (const auto& link : links_) highest = std::max(highest, link.latency_s);
  return highest;
}

double LinkModel::collective_seconds(const Traffic& traffic) const {
  return seconds(traffic, slowest_bandwidth_bps(), highest_latency_s());
}

double LinkModel::message_seconds(int rank_a, int rank_b, const Traffic& traffic) const {
  const LinkSpec& a = link_of(rank_a);
  const LinkSpec& b = link_of(rank_b);
  double bandwidth = a.bandwidth_bps;
  if (b.bandwidth_bps > 0 && (bandwidth == 0 || b.bandwidth_bps < bandwidth)) bandwidth = b.bandwidth_bps;
  return seconds(traffic, bandwidth, std::max(a.latency_s, b.latency_s));
}

std::string LinkModel::describe() const {
  if (!emulates_anything()) return "no emulated link";
  if (links_.size() == 1) return describe_link(links_[0]);
  std::string text;
  for (std::size_t rank = 0; rank < links_.size(); ++rank) {
    text += fmt::format("{}rank {}: {}", rank == 0 ? "" : "; ", rank, describe_link(links_[rank]));
  }
  return text;
}

}  // namespace loco::comm
