// Work spread over threads started together: replicas of one process, each on its own thread.
#pragma once

#include <functional>
#include <string>

#include "loco/util/error.h"

namespace loco {

// Runs body(i) for i < count, each on a thread of its own, and joins them all. body must not throw. When the
// system refuses a thread (its limit on threads, or on memory for their stacks), not_started(i) is called for
// that i and every later one, so that those already running can give up on them, and once they are joined an
// Error names the limit and `what` (the setting that asked for the threads). A std::thread left unjoined
// when its vector is destroyed ends the process (std::terminate: "terminate called without an active
// exception"), which is why the failure is caught here.
void run_on_threads(int count, const std::function<void(int)>& body, const std::function<void(int)>& not_started,
                    const char* what);

// The Error of a thread the system refused: the `number`th of `count` that `what` asks for, for `reason`.
Error threads_refused(int number, int count, const char* what, const std::string& reason);

}  // namespace loco
