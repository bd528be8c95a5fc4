#include "loco/membership/bounded_request.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "loco/membership/authentication.h"

namespace loco::membership {

namespace {

// httplib's error names ("Connection", "Read") as what happened.
std::string failure_in_words(httplib::Error error, const std::string& host) {
  switch (error) {
    case httplib::Error::Connection: {
      // httplib says "Connection" for a name that does not resolve too.
      addrinfo* found = nullptr;
      const int resolved = ::getaddrinfo(host.c_str(), nullptr, nullptr, &found);
      if (found) ::freeaddrinfo(found);
      if (resolved != 0) {
        return fmt::format("cannot connect: the host name '{}' does not resolve ({})", host, ::gai_strerror(resolved));
      }
      return "cannot connect: nothing listens at that address, or a firewall is in the way";
    }
    case httplib::Error::ConnectionTimeout:
      return "the connection was not accepted in time";
    case httplib::Error::Read:
      return "the connection closed before a whole answer came";
    case httplib::Error::Write:
      return "the connection closed while the request was sent";
    default:
      return httplib::to_string(error);
  }
}

}  // namespace

std::optional<HttpAnswer> bounded_request(const CoordinatorAddress& at, const std::string& method,
                                          const std::string& path,
                                          const std::vector<std::pair<std::string, std::string>>& headers,
                                          const std::string& body, double timeout_s, std::string& why_not) {
  httplib::Client client(at.host, at.port);
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(timeout_s));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);

  httplib::Request request;
  request.method = method;
  request.path = path;
  for (const auto& [name, value] : headers) request.headers.emplace(name, value);
  if (method == "POST") {
    request.body = body;
    request.headers.emplace("Content-Type", "application/json");
  }
  std::string received;
  bool too_large = false;
  request.content_receiver = [&](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
    if (received.size() + length > kMaxAnswerBytes) {
      too_large = true;
      return false;
    }
    received.append(data, length);
    return true;
  };

  // The deadline of the whole request: httplib's timeouts bound each read, not their sum. Stopping the client
  // from another thread shuts its socket, and the request fails at once.
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false, cut_off = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!changed.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done; })) {
      cut_off = true;
      client.stop();
    }
  });
  // Ends the watchdog however send ends (an exception included): a joinable thread must never be destroyed.
  struct EndWatchdog {
    std::mutex& mutex;
    std::condition_variable& changed;
    bool& done;
    std::thread& watchdog;
    ~EndWatchdog() {
      {
        std::lock_guard<std::mutex> lock(mutex);
        done = true;
      }
      changed.notify_all();
      watchdog.join();
    }
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  bool answered = false;
  {
    const EndWatchdog end{mutex, changed, done, watchdog};
    answered = client.send(request, response, error);
  }

  if (too_large) {
    why_not = fmt::format("its answer was larger than {} MiB", kMaxAnswerBytes >> 20);
    return std::nullopt;
  }
  if (!answered) {
    why_not = cut_off ? fmt::format("no whole answer within {:.1f} s", timeout_s) : failure_in_words(error, at.host);
    return std::nullopt;
  }
  return HttpAnswer{response.status, std::move(received), response.get_header_value(kMacHeader)};
}

}  // namespace loco::membership
