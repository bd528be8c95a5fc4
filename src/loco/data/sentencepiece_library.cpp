#include "loco/data/sentencepiece_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "loco/util/error.h"

namespace loco::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* kPluginFileName = "loco_sentencepiece.so";

std::vector<fs::path> plugin_candidates() {
  // Empty is unset, as with every LOCO_ variable (dlopen("") opened the loco binary itself).
  if (const char* chosen = std::getenv("LOCO_SENTENCEPIECE_PLUGIN"); chosen != nullptr && *chosen != '\0') {
    return {chosen};
  }
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path executable = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(executable.parent_path() / kPluginFileName);
#ifdef LOCO_SENTENCEPIECE_PLUGIN_PATH
  candidates.emplace_back(LOCO_SENTENCEPIECE_PLUGIN_PATH);  // the build tree (set by CMake)
#endif
  return candidates;
}

const spm::Library& load_plugin() {
  std::string tried;
  for (const fs::path& candidate : plugin_candidates()) {
    // See note "sentencepiece-plugin": RTLD_DEEPBIND makes the plugin and libsentencepiece
    // resolve protobuf symbols in their own copy first; RTLD_LOCAL keeps that copy out of the
    // global scope that libtorch's protobuf uses.
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      tried += fmt::format("\n  {}: {}", candidate.string(), ::dlerror());
      continue;
    }
    using EntryPoint = const spm::Library* (*)();
    auto entry = reinterpret_cast<EntryPoint>(::dlsym(handle, spm::kPluginEntryPoint));
    if (entry == nullptr) {
      tried +=
          fmt::format("\n  {}: no {} (a plugin from another loco version)", candidate.string(), spm::kPluginEntryPoint);
      continue;
    }
    return *entry();  // the handle stays open for the life of the process
  }
  throw DataError(
      fmt::format("cannot load the sentencepiece plugin {}, which BPE tokenizers need; tried:{}\nBuild it (the "
                  "loco_sentencepiece target, built with loco) and keep it next to the loco binary, or set "
                  "LOCO_SENTENCEPIECE_PLUGIN to its path. `--tokenizer byte` works without it.",
                  kPluginFileName, tried));
}

}  // namespace

const spm::Library& sentencepiece_library() {
  static const spm::Library& library = load_plugin();
  return library;
}

}  // namespace loco::data
