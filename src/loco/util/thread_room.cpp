#include "loco/util/thread_room.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace loco {

void require_room_for_threads(int count) {
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::vector<std::thread> started;
  const auto end_them = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      release = true;
    }
    released.notify_all();
    for (std::thread& thread : started) thread.join();
  };
  try {
    for (int i = 0; i < count; ++i) {
      started.emplace_back([&] {
        std::unique_lock<std::mutex> lock(mutex);
        released.wait(lock, [&] { return release; });
      });
    }
  } catch (...) {
    end_them();
    throw;
  }
  end_them();
}

}  // namespace loco
