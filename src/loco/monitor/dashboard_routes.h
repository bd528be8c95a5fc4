// The dashboard's routes on an HTTP server (docs/dashboard.md), the same for a coordinator (its members'
// reports, for holders of the run's status token) and for `loco dashboard` (run directories):
//
//   GET /                 the page (dashboard_assets.h), or `page_instead`'s for who may not see it
//   GET /dashboard.js|css its script and style: code, the same for every run
//   GET /status           the member table and events as `status` gives them to this request
//   GET /history?after=N  the metric points after sequence number N (0: all kept), 403 for who may not see them
//
// Every answer of the server carries dashboard_headers() (the page may load nothing from elsewhere), its
// refusals too.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "loco/http/http_server.h"

namespace loco::monitor {

struct DashboardSource {
  // What this request may see of the run's status.
  std::function<nlohmann::json(const http::HttpRequest&)> status;
  // Whether this request may see the members, their metrics and the events (the page and /history).
  std::function<bool(const http::HttpRequest&)> may_see;
  // The points after `after` (MetricsHistory::since).
  std::function<nlohmann::json(std::uint64_t after)> history;
  // The page for a request that may not see the dashboard, from its status.
  std::function<std::string(const nlohmann::json& status)> page_instead;
};

void add_dashboard_routes(http::HttpServer& server, DashboardSource source);

}  // namespace loco::monitor
