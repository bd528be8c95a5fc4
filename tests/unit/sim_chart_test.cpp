// Charts through gnuplot: a PNG when gnuplot is installed, and a message naming the package when
// it is not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "loco/sim/gnuplot.h"
#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco::sim {
namespace {

const char* kScript = "set terminal pngcairo size 200,100\nset output output\nplot x\n";

// Sets PATH for the lifetime of the object.
class ScopedPath {
 public:
  explicit ScopedPath(const char* value) : saved_(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", value, 1);
  }
  ~ScopedPath() { ::setenv("PATH", saved_.c_str(), 1); }

 private:
  std::string saved_;
};

TEST(SimChart, MissingGnuplotNamesThePackage) {
  test::ScratchDir dir;
  ScopedPath empty_path((dir.path() / "no-programs-here").c_str());
  try {
    draw_chart(kScript, dir / "chart.png");
    FAIL() << "no error without gnuplot";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "chart.png"));
}

TEST(SimChart, DrawsAPngAndKeepsTheScript) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  test::ScratchDir dir;
  draw_chart(kScript, dir / "chart.png");
  std::ifstream png(dir / "chart.png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  EXPECT_TRUE(std::filesystem::exists(dir / "chart.gp"));
  EXPECT_THROW(draw_chart("this is not gnuplot\n", dir / "broken.png"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "broken.png"));
}

// Text put into a script (a label from a results CSV, the chart's own path) is only text to gnuplot: a command in
// backquotes ran inside the double quotes loco used, an @macro would expand, and a line end ended the command.
TEST(SimChart, TextInAScriptRunsNothing) {
  EXPECT_EQ(gnuplot_quote("dp`touch x` it's @m\nEOD"), "'dp`touch x` it''s @m EOD'");
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  test::ScratchDir dir;
  const std::string ran = (dir / "ran").string();
  draw_chart(std::string(kScript) + "set title " + gnuplot_quote("a`touch " + ran + "`b") + "\nreplot\n",
             dir / ("c`touch " + ran + "`.png"));
  EXPECT_FALSE(std::filesystem::exists(dir / "ran"));
  EXPECT_TRUE(std::filesystem::exists(dir / ("c`touch " + ran + "`.png")));
  EXPECT_THROW(draw_chart(kScript, dir / "line\nend.png"), ConfigError);
}

// gnuplot exits 0 when its write fails (a full disk) and leaves the image cut short: here a stand-in gnuplot
// that writes half a PNG. Refused, naming the disk, and nothing left (before: "wrote chart.png", exit 0).
TEST(SimChart, AnImageCutShortIsRefused) {
  test::ScratchDir dir;
  const auto programs = dir / "bin";
  std::filesystem::create_directory(programs);
  {
    std::ofstream fake(programs / "gnuplot");
    fake << "#!/bin/sh\n"
            "# called as: gnuplot -e \"output = 'FILE'\" SCRIPT\n"
            "out=$(printf '%s' \"$2\" | sed \"s/^output = '\\(.*\\)'$/\\1/\")\n"
            "printf '\\211PNG\\r\\n\\032\\nhalf an image' > \"$out\"\n";
  }
  std::filesystem::permissions(programs / "gnuplot", std::filesystem::perms::owner_all);
  const std::string path = programs.string() + ":/usr/bin:/bin";
  ScopedPath fake_only(path.c_str());
  try {
    draw_chart(kScript, dir / "chart.png");
    FAIL() << "a cut image was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("could not write all of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is the disk full?"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "chart.png"));
  EXPECT_FALSE(std::filesystem::exists(dir / "chart.gp"));  // nothing of the chart is left
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().rfind(".chart.png", 0), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace loco::sim
