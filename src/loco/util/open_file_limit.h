// The process's limit on open file descriptors (RLIMIT_NOFILE, `ulimit -n`): every run's store connection,
// Gloo pair, HTTP answer and open file takes one, and libtorch's store aborts the process when it cannot
// accept a connection for want of one (a c10d::SocketError thrown on its own thread).
#pragma once

#include <cstdint>

namespace loco {

// Raises the soft limit to the hard one (at most 2^20) and returns the soft limit the process then has. Many
// systems start processes with a soft limit of 1024 under a hard one far above: the store's 1,024
// connections alone take more.
std::uint64_t raise_open_file_limit();

// raise_open_file_limit, then Error naming `ulimit -n` when fewer than 32 descriptors remain: no command runs on so
// few (a run's files, its checkpoints, libtorch's /dev/urandom and cpuinfo), and each failed in its own words
// where it ran out ("[enforce fail at ThreadPool.cc:44] cpuinfo_initialize()", "Unable to open /dev/urandom",
// a checkpoint refused after the first steps).
void require_open_file_room();

}  // namespace loco
