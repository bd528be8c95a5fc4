#include "loco/http/http_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace loco::http {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool plain_text(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == '\t' || (c >= 0x20 && c < 0x7f); });
}

namespace {

HttpRefusal malformed(const std::string& what) {
  return HttpRefusal(400, fmt::format("{}; send an HTTP/1.1 request", what));
}

void parse_request_line(std::string_view line, HttpRequest& request) {
  const auto first = line.find(' '), last = line.rfind(' ');
  if (first == std::string_view::npos || first == last)
    throw malformed("the request line is not METHOD TARGET VERSION");
  const std::string_view method = line.substr(0, first), target = line.substr(first + 1, last - first - 1);
  const std::string_view version = line.substr(last + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") throw malformed("the request is not HTTP/1.0 or HTTP/1.1");
  if (target.empty() || target.front() != '/' || !plain_text(target) || target.find(' ') != std::string_view::npos) {
    throw malformed("the request target is not a path");
  }
  if (method != "GET" && method != "POST") {
    throw HttpRefusal(405, "only GET and POST are answered here");
  }
  request.method = method;
  const auto question = target.find('?');
  request.path = target.substr(0, question);
  if (question != std::string_view::npos) request.query = target.substr(question + 1);
}

void add_header(std::string_view line, HttpRequest& request) {
  const auto colon = line.find(':');
  const std::string_view name = colon == std::string_view::npos ? std::string_view() : line.substr(0, colon);
  if (name.empty() || !std::all_of(name.begin(), name.end(), token_char)) {
    throw malformed("a header line is not NAME: VALUE (a line folded onto the one before it is not accepted)");
  }
  const std::string_view value = trimmed(line.substr(colon + 1));
  if (!plain_text(value)) throw malformed(fmt::format("header {} holds a control character", name));
  if (request.headers.size() >= kMaxHeaders) {
    throw HttpRefusal(431, fmt::format("the request has more than {} headers; loco's members send a few", kMaxHeaders));
  }
  const auto [where, added] = request.headers.emplace(lower(name), value);
  if (!added) throw malformed(fmt::format("header {} appears twice", name));
}

// The body's framing: a Content-Length within the limit, nothing else (docs/security.md).
void check_framing(HttpRequest& request, std::size_t max_body_bytes) {
  if (request.headers.count("transfer-encoding") > 0) {
    throw HttpRefusal(411, fmt::format("a body sent with Transfer-Encoding is not accepted: send it whole with a "
                                       "Content-Length of at most {} bytes",
                                       max_body_bytes));
  }
  const std::string encoding = lower(request.header("content-encoding"));
  if (!encoding.empty() && encoding != "identity") {
    throw HttpRefusal(415, "a compressed body (Content-Encoding) is not accepted: send the JSON as it is");
  }
  const auto length = request.headers.find("content-length");
  if (length == request.headers.end()) {
    if (request.method == "POST") {
      throw HttpRefusal(411, fmt::format("a POST needs a Content-Length (at most {} bytes)", max_body_bytes));
    }
    return;
  }
  const std::string& text = length->second;
  std::uint64_t value = 0;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || stop != text.data() + text.size() ||
      (error != std::errc() && error != std::errc::result_out_of_range)) {
    throw malformed("Content-Length is not a whole number");
  }
  if (error == std::errc::result_out_of_range || value > max_body_bytes) {
    throw HttpRefusal(413, fmt::format("the body announces {} bytes; a message to the coordinator holds at most {}",
                                       text, max_body_bytes));
  }
  request.content_length = static_cast<std::size_t>(value);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int high = text[i] == '%' && i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int low = high >= 0 ? hex_digit(text[i + 2]) : -1;
    if (low >= 0) {
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const auto found = headers.find(lower(name));
  return found == headers.end() ? std::string() : found->second;
}

std::optional<std::string> HttpRequest::query_parameter(std::string_view name) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto equals = pair.find('=');
    if (percent_decoded(pair.substr(0, equals)) == name) {
      return equals == std::string_view::npos ? std::string() : percent_decoded(pair.substr(equals + 1));
    }
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
  }
  return std::nullopt;
}

std::optional<HeadEnd> find_head_end(std::string_view bytes) {
  for (std::size_t lf = bytes.find('\n'); lf != std::string_view::npos; lf = bytes.find('\n', lf + 1)) {
    const std::string_view next = bytes.substr(lf + 1);
    if (next.substr(0, 1) == "\n") return HeadEnd{lf + 1, lf + 2};
    if (next.substr(0, 2) == "\r\n") return HeadEnd{lf + 1, lf + 3};
  }
  return std::nullopt;
}

HttpRequest parse_request_head(std::string_view head, std::size_t max_body_bytes) {
  if (head.size() > kMaxHeadBytes) {
    throw HttpRefusal(
        431, fmt::format("the request's head is over {} bytes; loco's members send a few hundred", kMaxHeadBytes));
  }
  HttpRequest request;
  bool first = true;
  while (!head.empty()) {
    const auto end = head.find('\n');
    if (end == std::string_view::npos) throw malformed("a line of the request's head does not end with CRLF");
    std::string_view line = head.substr(0, end);
    head.remove_prefix(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      parse_request_line(line, request);
      first = false;
    } else {
      add_header(line, request);
    }
  }
  if (first) throw malformed("the request has no request line");
  check_framing(request, max_body_bytes);
  return request;
}

}  // namespace loco::http
