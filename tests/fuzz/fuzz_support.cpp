#include "fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "loco/util/fs.h"

namespace loco::fuzz {

namespace fs = std::filesystem;

namespace {

// Removed when the process exits normally; a crash leaves it for inspection (it holds the last input).
class ScratchDirectory {
 public:
  ScratchDirectory() : path_(fs::temp_directory_path() / ("loco-fuzz-" + std::to_string(::getpid()))) {
    make_fresh_directory(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    remove_tree(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

const fs::path& scratch_dir() {
  static const ScratchDirectory directory;
  return directory.path();
}

fs::path write_scratch_file(const std::string& name, std::string_view bytes) {
  const fs::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  fuzz_require(out.good(), "the scratch file could be written");
  return path;
}

void fuzz_require(bool condition, std::string_view what) {
  if (condition) return;
  std::fprintf(stderr, "loco fuzz: invariant broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace loco::fuzz
