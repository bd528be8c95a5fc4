// Errors, in the two tiers of docs/design.md §4.
//
// 1. loco::Error and its subclasses: conditions a user can cause and fix (bad config, missing
//    corpus, corrupted checkpoint, unwritable directory). The message is one paragraph that names
//    the problem and the fix; main() prints it without a stack trace and exits non-zero.
// 2. LOCO_CHECK: broken invariants inside loco. Prints file, line, the condition and a message.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace loco {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Bad command line, config key or value. Exit code 2, as for usage errors elsewhere.
class ConfigError : public Error {
  using Error::Error;
};
// Corpus, shards, tokenizer or metadata that cannot be used.
class DataError : public Error {
  using Error::Error;
};
// A checkpoint that is missing, truncated, corrupted or would be overwritten.
class CheckpointError : public Error {
  using Error::Error;
};
// A file or directory that cannot be read or written.
class IoError : public Error {
  using Error::Error;
};

// A broken invariant: a bug in loco, not a user error.
class InternalError : public std::logic_error {
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_check(const char* file, int line, const char* condition,
                             const std::string& message);

}  // namespace loco

#define LOCO_CHECK(condition, ...)                                                   \
  do {                                                                               \
    if (!(condition)) {                                                              \
      ::loco::fail_check(__FILE__, __LINE__, #condition, ::fmt::format(__VA_ARGS__)); \
    }                                                                                \
  } while (false)
