// One HTTP/1.1 request on a fresh connection and its answer, every part of it bounded: the peer may be anything
// (a hostile program, or one on the path), and the caller must neither hang on it nor hold whatever it sends.
// The exchange ends by a deadline over all of it (connecting, sending, the whole answer: a peer that sends one
// byte at a time is cut off there); the answer's head is at most kMaxHeadBytes in kMaxHeaders lines and its body
// at most the caller's limit. (cpp-httplib 0.11's client, used before audit round 11, matched the status line
// with std::regex, which recursed once per byte: a 50 KB reason phrase overflowed the stack of every member,
// and a header line without its end grew without bound.)
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loco::http {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

struct HttpExchange {
  std::string host;
  int port = 0;
  std::string method;  // GET or POST
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent as application/json with a POST
  double timeout_s = 10;
  std::size_t max_body_bytes = 0;
};

// The answer, or nullopt with `why_not` saying what happened, in words ("cannot connect: …", "no whole answer
// within 5.0 s", "its answer's head is longer than 8192 bytes", …).
std::optional<HttpReply> exchange(const HttpExchange& request, std::string& why_not);

// Parses an answer's head (its status line and header lines, without the empty line that ends them); nullopt
// with `why_not` when it is not one of HTTP/1.x. Pure, for tests.
std::optional<HttpReply> parse_response_head(std::string_view head, std::string& why_not);

}  // namespace loco::http
