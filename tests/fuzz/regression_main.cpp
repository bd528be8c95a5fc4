// The fuzz target's inputs as regression tests in the normal suite (gcc, no libFuzzer): every file of
// tests/fuzz/corpus/TARGET (the seeds) and tests/fuzz/crashes/TARGET (inputs that once failed) goes through
// the target's LLVMFuzzerTestOneInput, one test per file, so that a failure names its input. Built once
// per target (tests/fuzz/CMakeLists.txt); LOCO_FUZZ_INPUTS and LOCO_FUZZ_TARGET say where and which.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs() {
  std::vector<fs::path> files;
  for (const char* kind : {"corpus", "crashes"}) {
    const fs::path dir = fs::path(LOCO_FUZZ_INPUTS) / kind / LOCO_FUZZ_TARGET;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzInput : public testing::TestWithParam<fs::path> {};

TEST_P(FuzzInput, IsRefusedOnlyWithTypedErrors) {
  std::ifstream in(GetParam(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(in.good() || in.eof()) << GetParam();
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// "3_corpus_seed_name", "7_crashes_crash_abc": the test's name, unique, in the characters GoogleTest allows.
std::string input_name(const testing::TestParamInfo<fs::path>& info) {
  std::string name = std::to_string(info.index) + "_" + info.param.parent_path().parent_path().filename().string() +
                     "_" + info.param.filename().string();
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Files, FuzzInput, testing::ValuesIn(inputs()), input_name);

TEST(FuzzInputs, TheTargetHasSeeds) { EXPECT_FALSE(inputs().empty()) << "no seeds in tests/fuzz/corpus/" LOCO_FUZZ_TARGET; }

}  // namespace
