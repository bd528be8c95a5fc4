// The repository stands on its own: sources, docs, scripts and tests cite only pages it contains
// (docs/algorithm-reference.md, docs/design.md, docs/fault-tolerance.md), never the team's notes that
// lived beside the checkout. A citation of such a note fails here with its file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace loco {
namespace {

namespace fs = std::filesystem;

// The outside notes and the folder they lived in, spelled in pieces so that this file does not cite them.
const std::vector<std::string>& outside_references() {
  static const std::vector<std::string> needles = {
      std::string("ALGORITHMS") + ".md",
      std::string("DESIGN") + ".md",
      std::string("FAULT-TOLERANCE-ANCHORS") + ".md",
      std::string("../") + "shared",
  };
  return needles;
}

// Build trees (anything configured by CMake), hidden folders and Python caches hold no sources; the
// fuzz corpus is generated input, kept byte for byte as the fuzzers found it.
bool skipped_directory(const fs::path& directory, const fs::path& root) {
  const std::string name = directory.filename().string();
  if (name.empty() || name[0] == '.' || name == "__pycache__") return true;
  if (fs::exists(directory / "CMakeCache.txt")) return true;
  return fs::relative(directory, root).generic_string() == "tests/fuzz/corpus";
}

// Whether the file's bytes are text: binary files (safetensors fixtures, PNG charts) hold NUL bytes.
bool read_text(const fs::path& file, std::string* content) {
  std::ifstream in(file, std::ios::binary);
  content->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return content->find('\0') == std::string::npos;
}

// "path:line: text" for every line of `file` that cites an outside note.
void find_outside_references(const fs::path& file, const fs::path& root, std::vector<std::string>* hits) {
  std::string content;
  if (!read_text(file, &content)) return;
  std::size_t line_start = 0;
  for (int number = 1; line_start < content.size(); ++number) {
    std::size_t line_end = content.find('\n', line_start);
    if (line_end == std::string::npos) line_end = content.size();
    const std::string line = content.substr(line_start, line_end - line_start);
    for (const auto& needle : outside_references()) {
      if (line.find(needle) == std::string::npos) continue;
      hits->push_back(fs::relative(file, root).generic_string() + ":" + std::to_string(number) + ": " + line);
      break;
    }
    line_start = line_end + 1;
  }
}

TEST(SelfContainedDocs, NothingCitesNotesOutsideTheRepository) {
  const fs::path root = fs::path(LOCO_SOURCE_DIR);
  std::vector<std::string> hits;
  int files = 0;
  for (const char* top : {"README.md", "CMakeLists.txt"}) {
    find_outside_references(root / top, root, &hits);
    ++files;
  }
  for (const char* folder : {"src", "docs", "bench", "scripts", "tests", "configs"}) {
    for (auto it = fs::recursive_directory_iterator(root / folder); it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory()) {
        if (skipped_directory(it->path(), root)) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      find_outside_references(it->path(), root, &hits);
      ++files;
    }
  }
  EXPECT_GT(files, 300);  // the walk found the tree
  std::string report;
  for (const auto& hit : hits) report += "\n  " + hit;
  EXPECT_TRUE(hits.empty()) << hits.size()
                            << " line(s) cite notes that are not in the repository; cite docs/algorithm-reference.md, "
                               "docs/design.md or docs/fault-tolerance.md (same section numbers) instead:"
                            << report;
}

}  // namespace
}  // namespace loco
