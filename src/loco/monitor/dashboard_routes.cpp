#include "loco/monitor/dashboard_routes.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include "loco/monitor/dashboard_assets.h"

namespace loco::monitor {

namespace {

// ?after= of a /history request: absent is 0; nullopt unless a whole number.
std::optional<std::uint64_t> history_position(const http::HttpRequest& request) {
  const auto text = request.query_parameter("after");
  if (!text) return 0;
  if (text->empty() || text->size() > 19 ||
      !std::all_of(text->begin(), text->end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return std::nullopt;
  }
  return std::stoull(*text);
}

}  // namespace

namespace {

// Names and paths come from run directories as the file system has them, which need not be UTF-8 (a Latin-1
// directory name): shown with U+FFFD for what is not, where a plain dump refused, failing every request.
std::string as_text(const nlohmann::json& json, int indent = -1) {
  return json.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void add_dashboard_routes(http::HttpServer& server, DashboardSource source) {
  // The server's own refusals (404, 405, …) and the coordinator's other routes carry them too.
  for (const auto& [name, value] : dashboard_headers()) server.add_header_to_every_answer(name, value);
  const auto shared = std::make_shared<const DashboardSource>(std::move(source));
  for (const WebAsset& asset : dashboard_assets()) {
    server.route("GET", std::string(asset.path),
                 [shared, &asset](const http::HttpRequest& req, http::HttpResponse& res) {
                   res.content_type = std::string(asset.content_type);
                   res.body = asset.path != "/" || shared->may_see(req) ? std::string(asset.body)
                                                                        : shared->page_instead(shared->status(req));
                 });
  }
  server.route("GET", "/status", [shared](const http::HttpRequest& req, http::HttpResponse& res) {
    res.body = as_text(shared->status(req), 2) + "\n";
  });
  server.route("GET", "/history", [shared](const http::HttpRequest& req, http::HttpResponse& res) {
    if (!shared->may_see(req)) {
      res.status = 403;
      res.body = nlohmann::json{{"error", "the metrics history needs the run's status token (X-Loco-Token, or "
                                          "?token=; docs/security.md)"}}.dump();
      return;
    }
    const auto after = history_position(req);
    if (!after) {
      res.status = 400;
      res.body = nlohmann::json{{"error", "?after= must be a whole number: the last \"seq\" seen, 0 for all"}}.dump();
      return;
    }
    res.body = as_text(shared->history(*after));
  });
}

}  // namespace loco::monitor
