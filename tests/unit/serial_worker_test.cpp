// SerialWorker (src/loco/util/serial_worker.h): jobs run in order on one thread that is not the caller's,
// a job's exception reaches its future, pending() counts queued and running jobs, the destructor finishes
// what was queued, and what a job captured is released on the worker's thread (the group graveyard
// relies on that to keep a blocking destructor off the training thread).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "loco/util/serial_worker.h"

namespace loco {
namespace {

TEST(SerialWorker, RunsJobsInOrderOnItsOwnThread) {
  std::vector<int> order;
  std::thread::id ran_on;
  {
    SerialWorker worker;
    for (int i = 0; i < 5; ++i) {
      worker.submit([&order, &ran_on, i] {
        order.push_back(i);
        ran_on = std::this_thread::get_id();
      });
    }
  }  // the destructor finishes the queue
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(SerialWorker, AJobsExceptionReachesItsFutureAndLaterJobsStillRun) {
  SerialWorker worker;
  auto failing = worker.submit([] { throw std::runtime_error("peer lost"); });
  auto next = worker.submit([] {});
  EXPECT_THROW(failing.get(), std::runtime_error);
  EXPECT_NO_THROW(next.get());
}

TEST(SerialWorker, PendingCountsQueuedAndRunningJobs) {
  SerialWorker worker;
  std::atomic<bool> release{false};
  worker.submit([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  auto last = worker.submit([] {});
  EXPECT_EQ(worker.pending(), 2u);
  release = true;
  last.get();
  // The worker may still be between finishing the job and clearing its flag.
  for (int i = 0; i < 1000 && worker.pending() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(worker.pending(), 0u);
}

// A captured object whose destructor records the thread it ran on.
struct RecordsWhereItDies {
  explicit RecordsWhereItDies(std::thread::id* where) : died_on(where) {}
  ~RecordsWhereItDies() { *died_on = std::this_thread::get_id(); }
  std::thread::id* died_on;
};

TEST(SerialWorker, WhatAJobCapturedIsReleasedOnTheWorkersThread) {
  std::thread::id died_on;
  {
    SerialWorker worker;
    std::atomic<bool> release{false};
    worker.submit([&] {  // holds the worker until this thread has let go of `captured`
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    auto captured = std::make_shared<RecordsWhereItDies>(&died_on);
    worker.submit([captured] {});
    captured.reset();  // the queued job holds the last reference
    release = true;
  }
  EXPECT_NE(died_on, std::thread::id());
  EXPECT_NE(died_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace loco
