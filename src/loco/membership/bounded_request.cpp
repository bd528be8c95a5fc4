#include "loco/membership/bounded_request.h"

#include "loco/http/http_client.h"
#include "loco/http/http_request.h"
#include "loco/membership/authentication.h"

namespace loco::membership {

std::optional<HttpAnswer> bounded_request(const CoordinatorAddress& at, const std::string& method,
                                          const std::string& path,
                                          const std::vector<std::pair<std::string, std::string>>& headers,
                                          const std::string& body, double timeout_s, std::string& why_not) {
  http::HttpExchange request{at.host, at.port, method, path, headers, body, timeout_s, kMaxAnswerBytes};
  std::optional<http::HttpReply> response = http::exchange(request, why_not);
  if (!response) return std::nullopt;
  const auto mac = response->headers.find(http::lower(kMacHeader));
  return HttpAnswer{response->status, std::move(response->body),
                    mac == response->headers.end() ? std::string() : mac->second};
}

}  // namespace loco::membership
