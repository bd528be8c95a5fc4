// What answers at a coordinator's address, read by `loco status` and the members (status_client.h,
// bounded_request.h): peers that dribble, answer without end, send fields of other types or nest too deeply,
// another server's status; and coordinator addresses as users write them.
#include "loco/membership/status_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "loco/membership/member_client.h"
#include "loco/util/seconds_since.h"

namespace loco::membership {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kSecret = "the-test-run-secret";

// Whatever answers at a coordinator's address (bounded_request.h): a peer that answers one byte at a time is cut
// off at the request's deadline (httplib's timeouts bound each read, not their sum), and one that sends an
// endless answer is refused after 16 MiB, both with an error that says so; a status whose fields have other
// types is refused, not a crash.
class OddPeer {
 public:
  // `answer(socket)` runs for each connection, after its request was read.
  explicit OddPeer(std::function<void(int)> answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(listener_, 8);
    socklen_t length = sizeof(address);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      for (int connection; (connection = ::accept(listener_, nullptr, nullptr)) >= 0;) {
        char request[65536];
        if (::recv(connection, request, sizeof(request), 0) > 0) answer_(connection);
        ::close(connection);
      }
    });
  }
  ~OddPeer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::function<void(int)> answer_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// False once the client is gone.
bool send_text(int socket, const std::string& text) {
  return ::send(socket, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

std::string status_error(int port, double timeout_s, double* took_s = nullptr) {
  const auto started = Clock::now();
  try {
    run_status({"127.0.0.1", port}, kSecret, timeout_s);
  } catch (const MembershipError& e) {
    if (took_s) *took_s = seconds_since(started);
    return e.what();
  }
  return "";
}

TEST(StatusClient, APeerThatDribblesIsCutOffAtTheDeadline) {
  OddPeer dribbling([](int socket) {
    send_text(socket, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
    for (int i = 0; i < 100 && send_text(socket, "{"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  double took = 0;
  const std::string error = status_error(dribbling.port(), 1.0, &took);
  EXPECT_NE(error.find("no whole answer within 1.0 s"), std::string::npos) << error;
  EXPECT_LT(took, 5.0);
}

TEST(StatusClient, AnEndlessAnswerIsRefusedAfterSixteenMebibytes) {
  OddPeer endless([](int socket) {
    send_text(socket, "HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\n");
    const std::string chunk(1 << 20, '{');
    int sent = 0;
    while (sent < 64 && send_text(socket, chunk)) ++sent;
  });
  const std::string error = status_error(endless.port(), 30.0);
  EXPECT_NE(error.find("larger than 16 MiB"), std::string::npos) << error;
}

TEST(StatusClient, FieldsOfOtherTypesAreRefused) {
  OddPeer odd([](int socket) {
    const std::string body = R"({"members": 5, "events": "x", "run_id": 7})";
    send_text(socket, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  const std::string error = status_error(odd.port(), 5.0);
  EXPECT_NE(error.find("does not take the status token"), std::string::npos) << error;
  try {
    format_status(nlohmann::json::parse(R"({"run_id": 7, "quorum": {}, "members": [], "events": []})"), 5);
    ADD_FAILURE() << "a run id of another type was formatted";
  } catch (const MembershipError& e) {
    EXPECT_NE(std::string(e.what()).find("sent a status loco cannot read"), std::string::npos) << e.what();
  }
}

// 16 MiB of '[' (within the answer's bound) built one JSON value per level: 1.4 GB, then a message blaming NaN. Now
// refused before parsing, naming the address; and a server whose status has members but no quorum (loco
// dashboard's) is no coordinator, for --json too (before: printed as the run's status, exit 0).
TEST(StatusClient, ADeeplyNestedAnswerOrAnotherServersStatusIsRefused) {
  OddPeer deep([](int socket) {
    const std::string body(16 << 20, '[');
    send_text(socket, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  std::string error = status_error(deep.port(), 30.0);
  EXPECT_NE(error.find("to GET /status is not a coordinator's status (the message nests arrays and objects more "
                       "than 32 levels deep"),
            std::string::npos)
      << error;
  OddPeer dashboard([](int socket) {
    const std::string body = R"({"runs": [], "members": [{"id": "runs/a"}]})";
    send_text(socket, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  error = status_error(dashboard.port(), 5.0);
  EXPECT_NE(error.find("without a quorum and its events: it is not a loco coordinator"), std::string::npos) << error;
}

TEST(CoordinatorAddress, ParsesHostAndPort) {
  EXPECT_EQ(parse_coordinator_address("node0:29400", "LOCO_COORDINATOR").host, "node0");
  EXPECT_EQ(parse_coordinator_address("[::1]:80", "LOCO_COORDINATOR").host, "::1");
  EXPECT_EQ(parse_coordinator_address("10.0.0.2:1", "LOCO_COORDINATOR").port, 1);
  for (const char* bad : {"node0", "node0:", ":29400", "node0:70000", "node0:http", "node0:1.5", "https://node0:1",
                          "HTTPS://node0:1", " node0:1", "node0:1 ", "node0:1\n"}) {
    EXPECT_THROW(parse_coordinator_address(bad, "LOCO_COORDINATOR"), ConfigError) << bad;
  }
  // As a browser shows the coordinator's page (the host was "http://node0" before).
  const CoordinatorAddress page = parse_coordinator_address("http://node0:29400/", "--coordinator");
  EXPECT_EQ(page.host, "node0");
  EXPECT_EQ(page.port, 29400);
  EXPECT_EQ(parse_coordinator_address("HTTP://node0:29400", "--coordinator").host, "node0");  // any case
  // Audit round 14: a space was part of the host name, which "did not resolve" for the whole join timeout.
  try {
    parse_coordinator_address(" node0:29400", "LOCO_COORDINATOR");
    ADD_FAILURE() << "an address with a space was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("holds a space or a control character"), std::string::npos) << e.what();
  }
}

// "(Connection)" said what httplib calls the failure; the message says what happened.
TEST(CoordinatorAddress, AnAddressWhereNothingListensIsSaidInWords) {
  try {
    run_progress(parse_coordinator_address("127.0.0.1:1", "--coordinator"), 5.0);
    ADD_FAILURE() << "a status came from port 1";
  } catch (const MembershipError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect: nothing listens at that address"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loco::membership
