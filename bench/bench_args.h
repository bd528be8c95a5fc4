// Command-line values for the micro-benchmarks (bench/*_bench.cpp): a bad one is a clear message and exit
// status 2, not an exception out of main.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

namespace loco::bench {

// argv[i + 1], the value of the flag argv[i]; advances i.
inline std::string flag_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    fmt::print(stderr, "{} needs a value\n", argv[i]);
    std::exit(2);
  }
  return argv[++i];
}

// The value of the flag argv[i] as a whole number ≥ 1; advances i.
inline std::int64_t positive_flag_value(int argc, char** argv, int& i) {
  const std::string flag = argv[i];
  const std::string text = flag_value(argc, argv, i);
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0) {
    fmt::print(stderr, "{} needs a positive whole number, got '{}'\n", flag, text);
    std::exit(2);
  }
  return value;
}

// --device is cpu or cuda, and --bf16 (CUDA autocast) only with cuda; otherwise a message and exit status 2.
inline void require_device_flags(const std::string& device, bool bf16) {
  if (device != "cpu" && device != "cuda") {
    fmt::print(stderr, "--device is cpu or cuda, got '{}'\n", device);
    std::exit(2);
  }
  if (bf16 && device != "cuda") {
    fmt::print(stderr, "--bf16 is CUDA autocast: it needs --device cuda\n");
    std::exit(2);
  }
}

}  // namespace loco::bench
