// One HTTP/1.1 request as the coordinator accepts it (docs/security.md "The coordinator's front door"). The
// coordinator serves anyone on its network, so what it reads is bounded before it is read: a head of at most
// kMaxHeadBytes and kMaxHeaders lines, and a body announced by Content-Length, at most the server's limit.
// Nothing a member sends needs more: a chunked or compressed body, or one ended by closing the connection,
// is refused from its head, before a byte of it is read (cpp-httplib 0.11 read such bodies whole, and
// inflated gzip, before its payload limit applied; issue 35). Pure parsing, fuzzed (tests/fuzz).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace loco::http {

inline constexpr std::size_t kMaxHeadBytes = 8 * 1024;  // request line and headers
inline constexpr std::size_t kMaxHeaders = 64;

// A request that is refused from what was read of it: its HTTP status and why, in words that name the fix.
class HttpRefusal : public std::runtime_error {
 public:
  HttpRefusal(int status, const std::string& what) : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct HttpRequest {
  std::string method;                          // GET or POST
  std::string path;                            // without the query
  std::string query;                           // after '?', undecoded
  std::map<std::string, std::string> headers;  // names in lower case
  std::size_t content_length = 0;
  std::string body;
  std::string remote_addr;

  // The header `name` (any case), or "".
  std::string header(std::string_view name) const;
  // The query parameter `name`, percent-decoded; nullopt when absent.
  std::optional<std::string> query_parameter(std::string_view name) const;
};

// Where a request's head ends in `bytes`, its first bytes read: `head_size` bytes of request line and header
// lines, then the empty line, and the body from `body_start`. Lines end with CRLF, or with a bare LF, which
// RFC 9112 section 2.2 lets a server accept (people typing at nc or telnet send it). nullopt while the empty
// line has not come.
struct HeadEnd {
  std::size_t head_size;
  std::size_t body_start;
};
std::optional<HeadEnd> find_head_end(std::string_view bytes);

// Parses `head` (the request line and the header lines, each ended by CRLF or LF, without the empty line
// that ends them) of a request whose body may hold at most `max_body_bytes`. HttpRefusal: 400 (not HTTP/1.x, a
// malformed line, two Content-Lengths), 405 (a method other than GET or POST), 411 (a chunked body, or a
// POST without Content-Length), 413 (a Content-Length over the limit), 415 (a Content-Encoding), 431 (more
// than kMaxHeaders headers).
HttpRequest parse_request_head(std::string_view head, std::size_t max_body_bytes);

// The pieces of a head both sides read (http_client.h too).
std::string lower(std::string_view text);
std::string_view trimmed(std::string_view text);  // without the spaces and tabs at its ends
bool token_char(char c);                          // RFC 9110 "token": a character of a header name
// Visible ASCII, space and tab: what a header value or a request target may hold (no CR, LF or NUL, which would
// let a value end a line where the sender did not).
bool plain_text(std::string_view text);

}  // namespace loco::http
