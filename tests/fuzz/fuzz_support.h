// What the fuzz targets share (docs/fuzzing.md). A target takes bytes as a file or a request body would
// bring them and hands them to a parser; the parser may refuse them only with one of loco's typed errors
// (util/error.h), which the target catches. Anything else is a finding: another exception escapes the
// target (libFuzzer reports it as a crash), a broken invariant calls fuzz_require, and the sanitizers
// report memory errors, undefined behaviour and leaks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace loco::fuzz {

// The input as a string (a request body, a file's text).
std::string as_text(const std::uint8_t* data, std::size_t size);

// Writes the input to `name` in this process's scratch directory (under the system temp dir, removed at
// exit) and returns its path: for parsers that read files.
std::filesystem::path write_scratch_file(const std::string& name, std::string_view bytes);

// The scratch directory itself (for parsers that read a directory).
const std::filesystem::path& scratch_dir();

// Aborts with `what` when `condition` is false: an invariant the parser promised does not hold.
void fuzz_require(bool condition, std::string_view what);

}  // namespace loco::fuzz
