#include "loco/comm/c10d/store_front.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>

#include "loco/comm/comm_error.h"
#include "loco/util/open_file_limit.h"

namespace loco::comm {

namespace {

using Clock = std::chrono::steady_clock;

// The queries of libtorch 1.13's TCPStore, by their first byte, and what follows each.
enum Query : std::uint8_t { kSet, kCompareSet, kGet, kAdd, kCheck, kWait, kGetNumKeys, kWatchKey, kDeleteKey };

// The client closed, the front is stopping, or a message broke the rules: the connection ends.
struct ConnectionEnds {};

bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads one message of the store's protocol from a client, whole, into `message`.
class MessageReader {
 public:
  MessageReader(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}

  std::string next() {
    message_.clear();
    wait_for_first_byte();
    deadline_ = Clock::now() +
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kStoreMessageDeadlineS));
    const auto query = static_cast<std::uint8_t>(bytes(1)[0]);
    switch (query) {
      case kSet:
        key();
        blob();
        break;
      case kCompareSet:
        key();
        blob();
        blob();
        break;
      case kGet:
      case kWatchKey:
      case kDeleteKey:
        key();
        break;
      case kAdd:
        key();
        bytes(sizeof(std::int64_t));
        break;
      case kCheck:
      case kWait: {
        const std::uint64_t keys = length(kMaxStoreKeysPerQuery);
        for (std::uint64_t i = 0; i < keys; ++i) key();
        break;
      }
      case kGetNumKeys:
        break;
      default:
        throw ConnectionEnds{};  // no query of the store: whatever follows cannot be framed
    }
    return message_;
  }

 private:
  void wait_for_first_byte() {
    while (!stopping_) {
      pollfd wait{fd_, POLLIN, 0};
      if (::poll(&wait, 1, 200) > 0) return;  // 200 ms: how long the front's stop waits for this thread
    }
    throw ConnectionEnds{};
  }

  // `count` more bytes of the message, which must all arrive before its deadline.
  const char* bytes(std::size_t count) {
    const std::size_t start = message_.size();
    message_.resize(start + count);
    std::size_t got = 0;
    while (got < count) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      pollfd wait{fd_, POLLIN, 0};
      if (left <= 0 || stopping_ || ::poll(&wait, 1, static_cast<int>(std::min<long long>(left, 200))) < 0) {
        throw ConnectionEnds{};
      }
      if (!(wait.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(fd_, message_.data() + start + got, count - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw ConnectionEnds{};
      got += static_cast<std::size_t>(n);
    }
    return message_.data() + start;
  }

  // A length as the store's clients send it (a size_t in the host's byte order), at most `limit`: a longer
  // one is refused before a byte of what it announces is read.
  std::uint64_t length(std::size_t limit) {
    std::uint64_t value = 0;
    std::memcpy(&value, bytes(sizeof(value)), sizeof(value));
    if (value > limit) throw ConnectionEnds{};
    return value;
  }

  void key() { bytes(length(kMaxStoreKeyBytes)); }
  void blob() { bytes(length(kMaxStoreValueBytes)); }

  int fd_;
  const std::atomic<bool>& stopping_;
  std::string message_;
  Clock::time_point deadline_;
};

int listen_on(int port) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int yes = 1, no = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));  // IPv4 clients too, as c10d's store
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_any;
  address.sin6_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::listen(fd, 1024) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int connect_to_store(int store_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(store_port));
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

}  // namespace

struct StoreFront::Impl {
  // A client's connection and the front's connection to the store for it, served by two threads.
  struct Link {
    int client;
    int store;
    int threads = 2;  // the last one to finish closes both sockets
  };

  int listen_fd = -1;
  int port = 0;
  int store_port = 0;
  std::uint64_t most_links = kMaxStoreConnections;  // what the process's descriptors allow (the constructor's)
  std::atomic<bool> stopping{false};
  std::thread acceptor;
  std::mutex mutex;  // guards links
  std::condition_variable all_done;
  std::set<std::shared_ptr<Link>> links;

  // What the client sends goes on message by message, checked; what the store answers goes back as it
  // comes. Whichever direction ends first ends the other.
  void serve(int client, int store) {
    auto link = std::make_shared<Link>(Link{client, store});
    {
      std::lock_guard<std::mutex> lock(mutex);
      links.insert(link);
    }
    // Without a thread to be had (a limit of the system), the missing direction finishes at once.
    const auto start = [this, &link](auto body) {
      try {
        std::thread(body).detach();
      } catch (const std::system_error&) {
        finish(link);
      }
    };
    start([this, link] {
      try {
        MessageReader reader(link->client, stopping);
        while (true) {
          const std::string message = reader.next();
          if (!send_all(link->store, message.data(), message.size())) break;
        }
      } catch (const ConnectionEnds&) {
      }
      finish(link);
    });
    start([this, link] {
      char buffer[64 * 1024];
      ssize_t n = 0;
      while ((n = ::recv(link->store, buffer, sizeof(buffer), 0)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0 && !send_all(link->client, buffer, static_cast<std::size_t>(n))) break;
      }
      finish(link);
    });
  }

  void finish(const std::shared_ptr<Link>& link) {
    std::lock_guard<std::mutex> lock(mutex);
    ::shutdown(link->client, SHUT_RDWR);  // wakes the other direction's thread
    ::shutdown(link->store, SHUT_RDWR);
    if (--link->threads > 0) return;
    ::close(link->client);
    ::close(link->store);
    links.erase(link);
    if (links.empty()) all_done.notify_all();
  }

  void accept_until_stopped() {
    while (!stopping) {
      pollfd wait{listen_fd, POLLIN, 0};
      if (::poll(&wait, 1, 200) <= 0) continue;
      const int client = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      bool full = false;
      {
        std::lock_guard<std::mutex> lock(mutex);
        full = links.size() >= most_links;
      }
      const int store = full ? -1 : connect_to_store(store_port);
      if (store < 0) {
        ::close(client);
        continue;
      }
      int yes = 1;
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      ::setsockopt(store, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      serve(client, store);
    }
  }
};

StoreFront::StoreFront(int port, int store_port) : impl_(std::make_unique<Impl>()) {
  impl_->store_port = store_port;
  // Each link holds three descriptors of this process (the client's, its own to the store, and the store's
  // end of that), beyond those the rest of the process needs: the store aborts the process when it cannot
  // accept a link for want of one, so the front never opens one it could not.
  const std::uint64_t limit = raise_open_file_limit();
  const std::uint64_t room = limit > kDescriptorsBesideTheStore ? (limit - kDescriptorsBesideTheStore) / 3 : 0;
  if (room < kLeastStoreConnections) {
    throw CommError(
        fmt::format("the process may open {} file descriptors (ulimit -n), too few to serve the run's "
                    "store: it needs {} beside it and 3 per member's connection, {} at least. Raise the "
                    "limit (ulimit -n 4096)",
                    limit, kDescriptorsBesideTheStore, kDescriptorsBesideTheStore + 3 * kLeastStoreConnections));
  }
  impl_->most_links = std::min<std::uint64_t>(kMaxStoreConnections, room);
  impl_->listen_fd = listen_on(port);
  if (impl_->listen_fd < 0) {
    throw CommError(
        fmt::format("cannot serve the run's store on port {}: {}. Choose another port for it (loco "
                    "coordinator --store-port, loco launch --elastic --master-port; 0 picks a free one)",
                    port, std::strerror(errno)));
  }
  sockaddr_in6 bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  impl_->port = ntohs(bound.sin6_port);
  impl_->acceptor = std::thread([this] { impl_->accept_until_stopped(); });
}

StoreFront::~StoreFront() {
  impl_->stopping = true;
  impl_->acceptor.join();
  ::close(impl_->listen_fd);
  std::unique_lock<std::mutex> lock(impl_->mutex);
  for (const auto& link : impl_->links) {
    ::shutdown(link->client, SHUT_RDWR);
    ::shutdown(link->store, SHUT_RDWR);
  }
  impl_->all_done.wait(lock, [this] { return impl_->links.empty(); });
}

int StoreFront::port() const { return impl_->port; }

}  // namespace loco::comm
