#include "loco/util/run_on_threads.h"

#include <fmt/format.h>

#include <optional>
#include <system_error>
#include <thread>
#include <vector>


namespace loco {

void run_on_threads(int count, const std::function<void(int)>& body, const std::function<void(int)>& not_started,
                    const char* what) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(count));
  std::optional<std::string> refused;
  int started = 0;
  for (; started < count; ++started) {
    try {
      threads.emplace_back([&body, started] { body(started); });
    } catch (const std::exception& e) {  // system_error (no thread), or bad_alloc (no memory for its state)
      refused = e.what();
      break;
    }
  }
  for (int i = started; i < count; ++i) not_started(i);
  for (auto& thread : threads) thread.join();
  if (refused) throw threads_refused(started + 1, count, what, *refused);
}

Error threads_refused(int number, int count, const char* what, const std::string& reason) {
  return Error(fmt::format("the system refused thread {} of the {} that {} asks for ({}): its limit on threads or "
                           "memory is lower (ulimit -u, ulimit -v). Ask for fewer, or raise the limit",
                           number, count, what, reason));
}

}  // namespace loco
