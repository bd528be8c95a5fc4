// One HTTP request to a coordinator, bounded in time and in size, as a member and `loco status` make them: the
// peer at the address may be anything (another program, a hostile one), and neither may hang on it or hold
// whatever it sends. The request ends within its timeout in all (connecting, sending, and the whole answer:
// a peer that answers one byte at a time is cut off at the deadline, not at a per-read timeout); the answer's
// head is bounded as a request's is (http/http_client.h), and a body over kMaxAnswerBytes is refused.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loco/membership/member_client.h"

namespace loco::membership {

inline constexpr std::size_t kMaxAnswerBytes = 16u << 20;  // a status of thousands of members fits many times over

struct HttpAnswer {
  int status = 0;
  std::string body;
  std::string mac;  // the X-Loco-Mac header (authentication.h), empty when absent
};

// `method` "GET" or "POST" (with `body`, JSON). Nullopt when no whole answer came within `timeout_s` or it was
// too large; `why_not` then says which.
std::optional<HttpAnswer> bounded_request(const CoordinatorAddress& at, const std::string& method,
                                          const std::string& path,
                                          const std::vector<std::pair<std::string, std::string>>& headers,
                                          const std::string& body, double timeout_s, std::string& why_not);

}  // namespace loco::membership
