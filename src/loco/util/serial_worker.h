// Jobs that run on one thread of their own, one after another in the order they were submitted, while the
// submitter goes on. Used for Streaming DiLoCo's overlapped exchanges (algo/streaming_diloco.h: while any
// are queued the worker is the only user of the strategy's group, so every replica starts the same
// collectives in the same order, docs/algorithm-reference.md §10) and for destroying abandoned process groups off the
// training thread (note "group-graveyard", comm/group_graveyard.h).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace loco {

class SerialWorker {
 public:
  SerialWorker();
  // Finishes the queued jobs, then stops.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // The future rethrows the job's exception (a CommError, PeerLost, ...) from get().
  std::future<void> submit(std::function<void()> job);
  // Jobs submitted and not finished (the one running included).
  std::size_t pending() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loco
