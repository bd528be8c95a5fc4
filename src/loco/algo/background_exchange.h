// Streaming DiLoCo's overlap (ALGORITHMS.md §4 point 2) needs an exchange to run while inner steps
// go on. Jobs run here on one thread, in the order they were submitted; while any are queued this
// thread is the only user of the strategy's group, so every replica starts the same collectives in
// the same order (§10: fragments must be reduced in the same order everywhere).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace loco {

class BackgroundExchange {
 public:
  BackgroundExchange();
  // Finishes the queued jobs, then stops.
  ~BackgroundExchange();
  BackgroundExchange(const BackgroundExchange&) = delete;
  BackgroundExchange& operator=(const BackgroundExchange&) = delete;

  // The future rethrows the job's exception (a CommError, PeerLost, ...) from get().
  std::future<void> submit(std::function<void()> job);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loco
