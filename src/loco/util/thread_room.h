// Whether this process may start the threads it is about to need (note "thread-room"). libtorch's thread pool
// (pthreadpool, which torch::set_num_threads makes) waits forever for a thread that could not start: under a
// `ulimit -u` (or a container's pids limit) a little above what loco needs, train and eval hung in their
// set-up, deaf to SIGTERM. So that many threads are started first, all at once, and let go.
#pragma once

namespace loco {

// Starts `count` threads that wait for each other, then ends them. Throws std::system_error (EAGAIN) when one
// cannot start, as std::thread does: main reports it naming `ulimit -u`.
void require_room_for_threads(int count);

}  // namespace loco
