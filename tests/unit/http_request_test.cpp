// What the coordinator's HTTP server accepts from a request's head (http/http_request.h): the bounds
// that keep anyone on the network from making it read, inflate or hold more than a member's message.
#include "loco/http/http_request.h"

#include <gtest/gtest.h>

#include <functional>
#include <utility>

namespace loco::http {
namespace {

constexpr std::size_t kLimit = 64 * 1024;

void expect_refused(const std::string& head, int status, const std::string& why) {
  try {
    parse_request_head(head, kLimit);
    ADD_FAILURE() << "accepted: " << head;
  } catch (const HttpRefusal& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(HttpRequest, AMembersRequestIsRead) {
  const HttpRequest post = parse_request_head(
      "POST /v1/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Length: 120\r\nX-Loco-Mac: ab12\r\n", kLimit);
  EXPECT_EQ(post.method, "POST");
  EXPECT_EQ(post.path, "/v1/heartbeat");
  EXPECT_EQ(post.content_length, 120u);
  EXPECT_EQ(post.header("x-loco-mac"), "ab12");
  EXPECT_EQ(post.header("X-LOCO-MAC"), "ab12");
  const HttpRequest get = parse_request_head("GET /?token=a%62c&x=1 HTTP/1.0\r\n", kLimit);
  EXPECT_EQ(get.path, "/");
  EXPECT_EQ(get.query_parameter("token"), "abc");
  EXPECT_EQ(get.query_parameter("x"), "1");
  EXPECT_FALSE(get.query_parameter("y"));
  EXPECT_EQ(get.content_length, 0u);
}

// Bodies whose size is not known from the head (chunked, ended by closing) or grows when read
// (compressed) are refused before a byte of them is read.
TEST(HttpRequest, OnlyABodyOfAnnouncedAndBoundedLengthIsAccepted) {
  expect_refused("POST /v1/join HTTP/1.1\r\nTransfer-Encoding: chunked\r\n", 411, "Transfer-Encoding");
  expect_refused("POST /v1/join HTTP/1.1\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n", 411,
                 "Content-Length of at most 65536");
  expect_refused("POST /v1/join HTTP/1.1\r\nHost: x\r\n", 411, "needs a Content-Length");
  expect_refused("POST /v1/join HTTP/1.1\r\nContent-Length: 65537\r\n", 413, "at most 65536");
  expect_refused("POST /v1/join HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n", 413, "at most 65536");
  expect_refused("POST /v1/join HTTP/1.1\r\nContent-Length: 100\r\nContent-Encoding: gzip\r\n", 415, "compressed");
  expect_refused("POST /v1/join HTTP/1.1\r\nContent-Length: -1\r\n", 400, "not a whole number");
  expect_refused("POST /v1/join HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 6\r\n", 400, "appears twice");
  EXPECT_EQ(parse_request_head("POST /v1/join HTTP/1.1\r\nContent-Length: 65536\r\n", kLimit).content_length, kLimit);
}

TEST(HttpRequest, AHeadThatIsNotPlainHttpIsRefused) {
  expect_refused(std::string(kMaxHeadBytes + 1, 'a'), 431, "over 8192 bytes");
  std::string many = "GET / HTTP/1.1\r\n";
  for (std::size_t i = 0; i <= kMaxHeaders; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  expect_refused(many, 431, "more than 64 headers");
  expect_refused("PUT / HTTP/1.1\r\n", 405, "only GET and POST are answered here");
  expect_refused("GET / HTTP/2\r\n", 400, "not HTTP/1.0 or HTTP/1.1");
  expect_refused("GET nowhere HTTP/1.1\r\n", 400, "not a path");
  expect_refused("GET / HTTP/1.1\r\n folded: line\r\n", 400, "NAME: VALUE");
  expect_refused(std::string("GET / HTTP/1.1\r\nX: a\0b\r\n", 24), 400, "control character");
  expect_refused("GET / HTTP/1.1\r\nX: a\rb\r\n", 400, "control character");  // a bare CR inside a line
  expect_refused("GET / HTTP/1.1\r\nX: 1", 400, "CRLF");
  expect_refused("", 400, "no request line");
}

// Lines may end with a bare LF, as typed at nc or telnet (before: no answer, the server waiting for CRLF
// CRLF until its deadline).
TEST(HttpRequest, LinesEndedByLfAloneAreRead) {
  const HttpRequest get = parse_request_head("GET /status HTTP/1.1\nHost: x\r\nX-A: 1\n", kLimit);
  EXPECT_EQ(get.path, "/status");
  EXPECT_EQ(get.header("host"), "x");
  EXPECT_EQ(get.header("x-a"), "1");
}

TEST(HttpRequest, TheHeadEndsAtTheFirstEmptyLine) {
  const auto end = [](std::string_view bytes) {
    const auto found = find_head_end(bytes);
    return found ? std::make_pair(found->head_size, found->body_start) : std::make_pair(std::size_t{0}, std::size_t{0});
  };
  using Ends = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(end("GET / HTTP/1.1\r\nA: 1\r\n\r\nbody"), Ends(22, 24));
  EXPECT_EQ(end("GET / HTTP/1.1\n\nbody"), Ends(15, 16));
  EXPECT_EQ(end("GET / HTTP/1.1\r\n\nbody"), Ends(16, 17));
  EXPECT_EQ(end("GET / HTTP/1.1\n\r\nbody\n\n"), Ends(15, 17));
  EXPECT_FALSE(find_head_end("GET / HTTP/1.1\r\nA: 1\r\n"));
  EXPECT_FALSE(find_head_end("GET / HTTP/1.1\r\n\r"));
  EXPECT_FALSE(find_head_end(""));
}

}  // namespace
}  // namespace loco::http
