#include "loco/comm/c10d/c10d_rendezvous.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <vector>

#include "loco/comm/c10d/c10d_compat.h"
#include "loco/comm/c10d/c10d_errors.h"
#include "loco/comm/comm_error.h"
#include "loco/util/host_port.h"
#include "loco/util/parse_number.h"
#include "loco/util/signal_name.h"
#include "loco/util/stop_requested.h"
#include "loco/util/tcp_connect.h"
#include "loco/util/utf8.h"

namespace loco::comm {

namespace {

std::string seconds(Timeout timeout) { return fmt::format("{:g} s", timeout.count() / 1000.0); }

// How long one attempt to reach rank 0's store lasts where a stop may end the wait, and the pause between two.
constexpr Timeout kConnectAttempt{2000};
constexpr Timeout kConnectPause{250};

}  // namespace

void stop_if_asked(const C10dOptions& options, const std::string& what) {
  // An elastic quorum's group (one that may be abandoned) is given up through its quorum instead: its member
  // stops as its strategy decides (note "graceful-stop").
  if (!options.group.stopping || options.group.abandoned) return;
  if (const int signal = options.group.stopping(); signal != 0) {
    throw StopRequested(signal, fmt::format("stopped by {} while rank {} of {} waited to {}", signal_name(signal),
                                            options.rank, options.world_size, what));
  }
}

namespace {

// How long a port is listened to for words it sends before it is asked anything.
constexpr std::chrono::milliseconds kUnaskedWordsWait{500};

// A service that speaks first (SSH's banner, SMTP's greeting) at MASTER_PORT made libtorch's store client read
// its words as a message length on a thread of its own, where the std::bad_alloc it threw ended the process
// (SIGABRT). So the port is listened to briefly before the client connects: words sent unasked are refused, by
// name. A port that refuses or closes the connection is left to the client, which says so.
void refuse_a_port_that_speaks_first(const C10dOptions& options) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.master_port);
  if (getaddrinfo(options.master_addr.c_str(), port.c_str(), &hints, &found) != 0) return;
  std::string heard;
  bool listened = false;  // to the first address that took the connection: the one the client will reach
  for (const addrinfo* a = found; a != nullptr && !listened; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    // Without blocking: an address that does not answer is left to the client's own timeout and stop checks.
    const bool connected = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 || (errno == EINPROGRESS && [&] {
                             pollfd writable{fd, POLLOUT, 0};
                             int error = 0;
                             socklen_t size = sizeof(error);
                             return ::poll(&writable, 1, static_cast<int>(kConnectAttempt.count())) == 1 &&
                                    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
                           }());
    if (connected) {
      listened = true;
      pollfd readable{fd, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>(kUnaskedWordsWait.count())) == 1) {
        char words[64];
        const ssize_t got = ::recv(fd, words, sizeof(words), MSG_DONTWAIT);
        if (got > 0) heard.assign(words, static_cast<std::size_t>(got));
      }
    }
    ::close(fd);
  }
  freeaddrinfo(found);
  if (heard.empty()) return;
  throw CommError(fmt::format(
      "the port at {} sent \"{}\" before it was asked anything: another service listens there (SSH, mail, a web "
      "server…), not rank 0's rendezvous store. Check MASTER_PORT (and MASTER_ADDR): give the port rank 0 serves "
      "its store on",
      host_port(options.master_addr, options.master_port), quoted_bytes(heard, 40)));
}

// libtorch's client gives its socket a receive timeout in a wait only: a `check` or `add` sent first to a store that
// never answers (rank 0 frozen, a listener that says nothing) waited forever, deaf to SIGTERM. A first wait, on a
// key of this rank's own, finds such a store within `timeout` and leaves a timeout on the socket for the calls
// after it.
void await_first_answer(c10d::Store& store, const C10dOptions& options, std::chrono::milliseconds timeout) {
  const std::string own = fmt::format("loco/connected/{}", options.rank);
  store.set(own, std::vector<std::uint8_t>{1});
  store.wait({own}, timeout);
}

// libtorch says a connection or a wait timed out in several words.
bool timed_out(const std::exception& e) { return mentions_any(first_line(e), {"timed out", "Timeout", "timeout"}); }

}  // namespace

c10::intrusive_ptr<c10d::Store> connect_store(const C10dOptions& options) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = options.rank0_serves_store && options.rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(options.world_size);
  // Rank 0 does not wait for the others here: the process group's handshake does, and names who is late.
  store_options.waitWorkers = false;
  store_options.timeout = options.rendezvous_timeout;
  // A rank that connects to another's store tries for kConnectAttempt at a time where a stop may be asked for
  // (GroupOptions::stopping), so that the stop ends a wait for a rank 0 that is not up yet. (libtorch counts a
  // connection's timeout in whole seconds: shorter attempts would fail at once.)
  const bool stoppable = !store_options.isServer && options.group.stopping && !options.group.abandoned &&
                         options.rendezvous_timeout > kConnectAttempt;
  const auto deadline = std::chrono::steady_clock::now() + options.rendezvous_timeout;
  if (stoppable) store_options.timeout = kConnectAttempt;
  // A host name that does not resolve is retried until the deadline (a cluster's name for rank 0 may appear once
  // its pod or node is up), then named with the resolver's answer (before: "could not reach the rendezvous store
  // … Check that rank 0 is running").
  std::size_t addresses = 0;  // of the store's host
  const auto resolve = [&] {  // getaddrinfo's status; counts the addresses
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int status = getaddrinfo(options.master_addr.c_str(), nullptr, &hints, &found);
    if (status != 0) return status;
    for (const addrinfo* at = found; at != nullptr; at = at->ai_next) ++addresses;
    freeaddrinfo(found);
    return 0;
  };
  if (store_options.isServer) resolve();  // its own host: a name that does not resolve is the store's error
  for (int status = -1; !store_options.isServer && (status = resolve()) != 0;) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw CommError(fmt::format(
          "rank {} could not resolve the rendezvous host '{}' ({}) within {}: {}. Give the "
          "host name or IP address of {}",
          options.rank, options.master_addr, options.rank0_serves_store ? "MASTER_ADDR" : "the coordinator's address",
          seconds(options.rendezvous_timeout), gai_strerror(status),
          options.rank0_serves_store ? "rank 0" : "the coordinator"));
    }
    if (stoppable) stop_if_asked(options, "resolve the rendezvous host");
    std::this_thread::sleep_for(kConnectPause);
  }
  if (!store_options.isServer && options.rank0_serves_store) refuse_a_port_that_speaks_first(options);
  try {
    c10::intrusive_ptr<c10d::Store> store;
    while (!store) {
      try {
        // libtorch's client spends each attempt on the host's first address: a host with several is connected
        // to here first (util/tcp_connect.h), and the client given the address that accepted.
        std::string host = options.master_addr;
        if (store_options.isServer && addresses > 1) {
          host = "127.0.0.1";  // its own store, which listens on every interface (audit round 14)
        } else if (addresses > 1) {
          const auto attempt_ends = std::min(deadline, std::chrono::steady_clock::now() + kConnectAttempt);
          const TcpConnection reached = tcp_connect(host, options.master_port, attempt_ends);
          if (reached.fd >= 0) {
            ::close(reached.fd);
            host = reached.address;
          }
        }
        store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
        if (!store_options.isServer) await_first_answer(*store, options, store_options.timeout);
      } catch (const std::exception& e) {
        store.reset();  // a wait that timed out may be answered late: the next attempt has a connection of its own
        // A stop's signal may have ended the attempt itself ("Interrupted system call").
        if (stoppable) stop_if_asked(options, "reach the rendezvous store");
        if (!stoppable || std::chrono::steady_clock::now() >= deadline || !timed_out(e)) throw;
        std::this_thread::sleep_for(kConnectPause);  // a refused connection fails at once: no spinning
      }
    }
    store->setTimeout(options.rendezvous_timeout);
    // The attempts' wait left their short timeout on the socket: the calls after it get the rendezvous's.
    if (stoppable) await_first_answer(*store, options, options.rendezvous_timeout);
    if (options.store_prefix.empty()) return store;
    return c10::make_intrusive<c10d::PrefixStore>(options.store_prefix, store);
  } catch (const StopRequested&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = first_line(e);
    const std::string where = host_port(options.master_addr, options.master_port);
    if (options.rank == 0 && mentions_any(what, {"in use"})) {
      throw CommError(fmt::format(
          "rank 0 cannot serve the rendezvous store on port {}: the port is already in use (another run, or a "
          "previous one still shutting down). Choose a free port with MASTER_PORT (or `loco launch --master-port "
          "0` to pick one).",
          options.master_port));
    }
    if (timed_out(e)) {
      const std::string server = options.rank0_serves_store
                                     ? "rank 0 is running and that MASTER_ADDR and MASTER_PORT name its host and port"
                                     : "the coordinator is running and serves its store there (loco coordinator "
                                       "--store-port)";
      throw CommTimeout(fmt::format("rank {} could not reach the rendezvous store at {} within {}. Check that {} "
                                    "(and that no firewall blocks the port).",
                                    options.rank, where, seconds(options.rendezvous_timeout), server));
    }
    throw CommError(fmt::format("rank {} could not set up the rendezvous store at {}: {}", options.rank, where, what));
  }
}

std::string local_address_towards(const std::string& master_addr, int master_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(master_port);
  if (const int status = getaddrinfo(master_addr.c_str(), port.c_str(), &hints, &found); status != 0) {
    throw CommError(fmt::format("cannot resolve MASTER_ADDR '{}': {}. Give the host name or IP address of rank 0.",
                                master_addr, gai_strerror(status)));
  }
  // A host with several addresses: the one a connection to the store reaches (util/tcp_connect.h), so that Gloo
  // binds (and advertises) the local address of the path that works, not of a route that is silent.
  if (found->ai_next != nullptr) {
    const TcpConnection reached =
        tcp_connect(master_addr, master_port, std::chrono::steady_clock::now() + kConnectAttempt);
    addrinfo* numeric = nullptr;
    hints.ai_flags = AI_NUMERICHOST;
    if (reached.fd >= 0 && getaddrinfo(reached.address.c_str(), port.c_str(), &hints, &numeric) == 0) {
      freeaddrinfo(found);
      found = numeric;
    }
    if (reached.fd >= 0) close(reached.fd);
  }
  std::string address;
  // Connecting a UDP socket sends nothing; it only asks the kernel which local address routes there. The first
  // of the host's addresses that a route reaches (a host name's IPv6 address may have none where IPv4 works).
  const addrinfo* routed = found;
  int fd = -1;
  for (; routed != nullptr; routed = routed->ai_next) {
    fd = socket(routed->ai_family, SOCK_DGRAM, 0);
    if (fd >= 0 && connect(fd, routed->ai_addr, routed->ai_addrlen) == 0) break;
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (fd >= 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    // A link-local IPv6 address with its interface (fe80::1%eth0): without it Gloo could not bind it
    // ("Cannot resolve fe80::… to a (local) address"), and every synchronisation failed.
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      address = numeric_address(reinterpret_cast<const sockaddr&>(local));
    }
  }
  const int saved_errno = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (address.empty()) {
    throw CommError(
        fmt::format("no local network address routes to MASTER_ADDR '{}' ({}). Check the address, or "
                    "name the interface with LOCO_SOCKET_IFNAME.",
                    master_addr, std::strerror(saved_errno)));
  }
  return address;
}

// Note "rank-claim" (audit round 14): two runs given one MASTER_PORT (both left on the default) met at one rank 0's
// store. Both of their rank 1s set rank 1's key: one trained in the other run as its replica, exit 0, and the other
// waited in Gloo's handshake without a time limit. A rank's key now holds the process that claimed it, and a
// second process is refused at once.
void claim_rank(c10d::Store& store, const C10dOptions& options) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string mine = fmt::format("{} pid {}", host, ::getpid());
  const std::vector<std::uint8_t> claim(mine.begin(), mine.end());
  const std::string key = fmt::format("loco/arrived/{}", options.rank);
  std::vector<std::uint8_t> held = store.compareSet(key, {}, claim);
  if (held == claim) return;
  // A claim of a process of this host that is gone (the rank stopped, or was killed, while the others waited, and
  // was started again by hand) is taken over; before, that rank was refused and the others waited until the
  // timeout (audit round 14). Another host's processes cannot be looked up: their claims hold.
  const std::string holder(held.begin(), held.end());
  const std::string here = fmt::format("{} pid ", host);
  if (holder.rfind(here, 0) == 0) {
    const std::optional<double> pid = parse_whole_number(holder.substr(here.size()));
    if (pid && *pid > 0 && *pid <= std::numeric_limits<pid_t>::max() && ::kill(static_cast<pid_t>(*pid), 0) != 0 &&
        errno == ESRCH) {
      held = store.compareSet(key, held, claim);
      if (held == claim) return;
    }
  }
  throw CommError(fmt::format(
      "rank {} of the run at {} is taken already, by another process ({}): two runs were given one MASTER_PORT "
      "(give each run a port of its own: MASTER_PORT, or loco launch --master-port; an elastic run's: the "
      "coordinator's --store-port), or rank {} was started twice",
      options.rank, host_port(options.master_addr, options.master_port),
      quoted_bytes(std::string(held.begin(), held.end()), 80), options.rank));
}

void await_every_rank(c10d::Store& store, const C10dOptions& options) {
  using Clock = std::chrono::steady_clock;
  // Each rank counts itself in (its key claimed: claim_rank): a poll reads the count (one small request, where
  // checking every rank's key sent world_size keys each time: 10^6 ranks overran a 5 s timeout by 96 s), and the
  // keys, checked once the count is full, hold off a rank counted twice (one process that comes again: an elastic
  // member retrying its quorum's group).
  store.add("loco/arrived", 1);
  std::vector<std::string> keys;
  for (int r = 0; r < options.world_size; ++r) keys.push_back(fmt::format("loco/arrived/{}", r));
  const auto deadline = Clock::now() + options.rendezvous_timeout;
  const auto everyone_came = [&] { return store.add("loco/arrived", 0) >= options.world_size && store.check(keys); };
  // A group that may be abandoned: a rank that gives it up says so in the store, and the others give it up too.
  // The ranks that gave up had counted themselves in: a rank late to the rendezvous (stopped a while, SIGSTOP)
  // found everyone come and went into Gloo's handshake, which cannot be interrupted, with ranks that had left,
  // until the rendezvous timeout, blaming its peers (measured: 30 s, deaf to SIGTERM).
  const std::string given_up = "loco/abandoned";
  const auto give_up_if_abandoned = [&] {
    if (!options.group.abandoned) return;
    const bool here = options.group.abandoned();
    if (!here && !store.check({given_up})) return;
    if (here) {
      try {
        store.set(given_up, std::vector<std::uint8_t>{1});
      } catch (const std::exception&) {  // the store is gone: the others find the group abandoned their own way
      }
    }
    throw PeerLost(fmt::format(
        "rank {} of {} gave up its rendezvous: the group was abandoned ({})", options.rank, options.world_size,
        here ? "a member of its quorum left before it came" : "another member gave it up before this one came"));
  };
  while (!everyone_came()) {
    stop_if_asked(options, "meet the others at the rendezvous");
    give_up_if_abandoned();
    if (Clock::now() > deadline) {
      // The missing ranks by name where there are few to look up, at most 20 of them said (a message of a million
      // ranks was 7.9 MB); else how many came.
      constexpr int kMostLookedUp = 4096;
      constexpr std::size_t kMostNamed = 20;
      std::string who;
      if (options.world_size <= kMostLookedUp) {
        std::vector<int> missing;
        for (int r = 0; r < options.world_size; ++r) {
          if (!store.check({keys[static_cast<std::size_t>(r)]})) missing.push_back(r);
        }
        who = missing.size() <= kMostNamed
                  ? fmt::format("rank(s) {}", fmt::join(missing, ", "))
                  : fmt::format("{} ranks ({}, …)", missing.size(),
                                fmt::join(missing.begin(), missing.begin() + kMostNamed, ", "));
      } else {
        who = fmt::format("{} of the ranks",
                          std::max<std::int64_t>(1, options.world_size - store.add("loco/arrived", 0)));
      }
      throw CommTimeout(fmt::format("rank {} of {}: {} did not come to the rendezvous within {}", options.rank,
                                    options.world_size, who, seconds(options.rendezvous_timeout)));
    }
    // An elastic quorum's group forms at every synchronisation: polled often. A static run's forms once, and
    // its rank 0 serves every rank's polls.
    std::this_thread::sleep_for(std::chrono::milliseconds(options.group.abandoned ? 5 : 50));
  }
  // Once more before the handshake: a late rank finds the count full. (Not a stop: with every rank come, the
  // others are in the handshake already, and the run stops at its first step as agreed.)
  give_up_if_abandoned();
}

namespace {

std::string world_size_key(int rank) { return fmt::format("loco/world_size/{}", rank); }

}  // namespace

void announce_world_size(c10d::Store& store, const C10dOptions& options) {
  const std::string size = std::to_string(options.world_size);
  store.set(world_size_key(options.rank), std::vector<std::uint8_t>(size.begin(), size.end()));
}

void require_same_world_size(c10d::Store& store, const C10dOptions& options) {
  // Rank 0 compares itself with every rank that came; the others with rank 0. Only keys already there are
  // read: a rank that never came is the handshake's to name.
  std::vector<int> others;
  if (options.rank == 0) {
    for (int r = 1; r < options.world_size; ++r) others.push_back(r);
  } else {
    others.push_back(0);
  }
  for (const int r : others) {
    try {
      if (!store.check({world_size_key(r)})) continue;
      const std::vector<std::uint8_t> value = store.get(world_size_key(r));
      const std::string theirs(value.begin(), value.end());
      if (theirs == std::to_string(options.world_size)) continue;
      if (theirs.empty() || theirs.size() > 19 ||
          !std::all_of(theirs.begin(), theirs.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        // Not what any rank wrote (announce_world_size): the port serves something other than a c10d store,
        // or one whose keys were overwritten. No WORLD_SIZE differs; saying so sent users to the wrong fix.
        throw CommError(fmt::format(
            "the store at {} answered '{}' for rank {}'s WORLD_SIZE, which no rank writes: the port serves "
            "something other than the run's c10d store. Check MASTER_PORT (or the coordinator's --store-port) "
            "and that nothing else listens there",
            host_port(options.master_addr, options.master_port), quoted_bytes(theirs, 20), r));
      }
      throw CommError(fmt::format("rank {} was started with WORLD_SIZE {} but rank {} with WORLD_SIZE {}: every rank "
                                  "of a run must be given the same WORLD_SIZE (loco launch --nproc N gives every "
                                  "rank N; on several hosts, give each the same total)",
                                  options.rank, options.world_size, r, theirs.substr(0, 20)));
    } catch (const CommError&) {
      throw;
    } catch (const std::exception&) {  // the store is gone too: nothing to compare
      return;
    }
  }
}

}  // namespace loco::comm
