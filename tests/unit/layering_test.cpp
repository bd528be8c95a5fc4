// The folders of src/loco are layers (docs/architecture.md): a file may include its own folder and the
// folders listed for it below, never a higher one. A new include that runs upwards (train → algo,
// config → comm, comm → launch, …) fails here with the file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace loco {
namespace {

namespace fs = std::filesystem;

// What each folder may include besides itself.
const std::map<std::string, std::set<std::string>>& allowed_includes() {
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"util", {}},
      {"io", {"util"}},
      {"config", {"util"}},
      {"data", {"util"}},
      {"comm", {"util"}},
      {"launch", {"util"}},
      {"http", {"util"}},
      {"monitor", {"util", "http"}},
      {"membership", {"util", "http", "monitor"}},
      {"elastic", {"util", "io", "config", "data", "model", "comm", "http", "monitor", "membership", "train", "algo"}},
      {"model", {"util", "io", "config", "data"}},
      {"train", {"util", "io", "config", "data", "model", "comm", "pipeline"}},
      {"algo", {"util", "io", "config", "data", "model", "comm", "pipeline", "train"}},
      {"pipeline", {"util", "io", "config", "data", "model", "comm"}},
      {"sim", {"util", "config"}},
      {"sweep", {"util", "config", "sim"}},
      {"plugins", {"util", "data"}},
      {"run",
       {"util", "io", "config", "data", "model", "comm", "http", "monitor", "membership", "elastic", "train", "algo"}},
      {"cli",
       {"util", "io", "config", "data", "model", "comm", "launch", "http", "monitor", "membership", "elastic", "train",
        "algo", "sim", "sweep", "run"}},
  };
  return allowed;
}

TEST(Layering, NoFolderIncludesAHigherOne) {
  const fs::path root = fs::path(LOCO_SOURCE_DIR) / "src" / "loco";
  const std::regex include(R"re(^\s*#\s*include\s*"loco/([a-z_]+)/)re");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string extension = entry.path().extension().string();
    if (!entry.is_regular_file() || (extension != ".h" && extension != ".cpp")) continue;
    const std::string folder = fs::relative(entry.path(), root).begin()->string();
    const auto rule = allowed_includes().find(folder);
    ASSERT_NE(rule, allowed_includes().end()) << "src/loco/" << folder << " has no layer: add it to this test";
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch match;
      if (!std::regex_search(line, match, include)) continue;
      const std::string target = match[1];
      EXPECT_TRUE(target == folder || rule->second.count(target) > 0)
          << fs::relative(entry.path(), root).string() << ":" << number << " includes loco/" << target
          << "/, a layer above " << folder << "/";
    }
  }
  EXPECT_GT(files, 100);  // the walk found the sources
}

}  // namespace
}  // namespace loco
