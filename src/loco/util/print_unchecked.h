// Progress and diagnostics are written whatever becomes of them. fmt::print throws std::system_error when the
// stream's write fails (standard error on a full disk, or a pipe whose reader is gone), and a run stopped by
// SIGHUP died there, before its checkpoint, as did every command whose error message failed in main's handler
// (a second throw there ended the process with SIGABRT). What a command exists to output (eval's loss, generate's
// text) is printed with fmt::print and checked by main; everything else goes through here.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace loco {

template <typename... Args>
void print_unchecked(std::FILE* stream, fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    fmt::print(stream, format, std::forward<Args>(args)...);
  } catch (...) {  // the message is lost, as on a terminal that was closed; the command goes on
  }
}

}  // namespace loco
