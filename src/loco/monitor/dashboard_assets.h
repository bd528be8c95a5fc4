// The dashboard's page, script and style (src/loco/monitor/web/), compiled into loco so that the one binary
// serves them: nothing to install beside it, nothing fetched from elsewhere (docs/dashboard.md).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loco::monitor {

struct WebAsset {
  std::string_view path;  // "/" for the page
  std::string_view content_type;
  std::string_view body;
};

// The page at "/", "/dashboard.js" and "/dashboard.css".
const std::vector<WebAsset>& dashboard_assets();

// Headers for every answer of a dashboard server: the page may load and ask only its own server (a value
// that reached it by mistake as markup still could not run a script or send anything elsewhere), never sends
// the address (with its token) as a referrer, and is not framed by another site.
const std::vector<std::pair<std::string, std::string>>& dashboard_headers();

}  // namespace loco::monitor
