// Fuzz target: a request's head as the coordinator's HTTP server reads it (http/http_request.h), from
// anyone who reaches its port. Where its end is found it lies within the bytes, the body after it. The head
// is accepted or refused with HttpRefusal and one of the statuses the header lists, nothing else; an
// accepted head announces a body within the limit, and its query reads.
#include <set>

#include "fuzz/fuzz_support.h"
#include "loco/http/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kLimit = 64 * 1024;
  std::string head = loco::fuzz::as_text(data, size);
  if (const auto end = loco::http::find_head_end(head)) {
    loco::fuzz::fuzz_require(end->head_size < end->body_start && end->body_start <= head.size(),
                             "the head ends before its body begins, within the bytes read");
    head.resize(end->head_size);
  }
  try {
    const loco::http::HttpRequest request = loco::http::parse_request_head(head, kLimit);
    loco::fuzz::fuzz_require(request.content_length <= kLimit, "an accepted body is within the limit");
    loco::fuzz::fuzz_require(request.method == "GET" || request.method == "POST", "only GET and POST are accepted");
    loco::fuzz::fuzz_require(!request.path.empty() && request.path[0] == '/', "an accepted target is a path");
    request.query_parameter("token");
    request.header("X-Loco-Mac");
  } catch (const loco::http::HttpRefusal& e) {
    static const std::set<int> statuses = {400, 405, 411, 413, 415, 431};
    loco::fuzz::fuzz_require(statuses.count(e.status()) > 0, "a refusal has one of the documented statuses");
  }
  return 0;
}
