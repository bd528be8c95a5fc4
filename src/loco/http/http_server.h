// loco's HTTP server: the coordinator's (docs/security.md "The coordinator's front door") and `loco dashboard`'s.
// Anyone on the network reaches it and a coordinator's members must always get through, so every connection
// is bounded in bytes and time:
//
//   - one request per connection (a member opens one per call), read with http_request.h's bounds: a head
//     of at most 8 KiB, a body by Content-Length only, at most `max_body_bytes`;
//   - the whole request must arrive within `request_deadline_s` of the connection's start, however slowly
//     its bytes trickle (a per-read timeout would let one header line every 2 s hold a connection forever);
//   - each connection has a thread of its own, so a slow one delays nobody else; at most
//     `max_waiting_connections` may still be sending their request, and when one more arrives one is closed:
//     of the address with the most connections waiting, the one that has waited longest. A member's request,
//     which arrives within milliseconds, is never the oldest, a flood from one address closes its own
//     connections rather than those of other hosts, and a connection whose request is being answered (a long
//     poll) is never closed;
//   - at most `max_answering_connections` requests are answered at once (a long poll, an answer being sent);
//     one more gets 503 at once ({"refusal": "unavailable"}, which a member retries), so the answers held in
//     memory are bounded however many clients ask;
//   - an answer must be taken by its reader within `answer_deadline_s`, however slowly it reads.
//
// cpp-httplib 0.11's server (Debian 12) could do none of this: its payload limit applied only to bodies with
// a Content-Length (chunked, unterminated and gzip bodies were read and inflated whole), its line reader
// buffered a request line of any length, its read timeout restarted with every byte, and its fixed thread
// pool was held by slow connections (issue 35). Its client is still what members use.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loco/http/http_request.h"

namespace loco::http {

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type, -Length and Connection
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct HttpServerLimits {
  std::size_t max_body_bytes = 64 * 1024;
  double request_deadline_s = 10;
  std::size_t max_waiting_connections = 256;
  std::size_t max_answering_connections = 64;
  double answer_deadline_s = 30;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Answers `method` (GET or POST) requests for `path`; other paths get 404. Before serve().
  void route(const std::string& method, const std::string& path, HttpHandler handler);
  // Headers every answer carries, the server's own refusals (404, 405, 411, 503, …) too, unless the answer sets
  // the same header itself. Before serve().
  void add_header_to_every_answer(const std::string& name, const std::string& value);
  // Listens on host:port (0: a free port); false when it cannot (in use, not an address of this host).
  bool bind(const std::string& host, int port);
  int port() const;
  // Accepts connections until stop(), then waits until every connection's thread is done.
  void serve();
  // Makes serve() return, closing the connections; callable from any thread, before or during serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loco::http
