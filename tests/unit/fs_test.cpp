// remove_tree (note "no-fs-remove-all" in util/fs.h): removes a whole tree, never follows a link out
// of it, and treats a missing path as done.
#include "loco/util/fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loco/util/directory_lock.h"
#include "loco/util/error.h"
#include "support/test_support.h"

namespace loco {
namespace {

// AtomicFileWriter: pieces make the file, counted and CRC'd as the whole would be; nothing appears before the
// commit, and nothing is left behind by one that never commits.
TEST(AtomicFileWriter, WritesThePiecesWholeOrNothing) {
  test::ScratchDir dir;
  {
    AtomicFileWriter file(dir / "a.bin");
    file.write("hello, ");
    file.write("world");
    EXPECT_FALSE(fs::exists(dir / "a.bin")) << "visible before the commit";
    const WrittenFile written = file.commit();
    EXPECT_EQ(written.bytes, 12u);
    EXPECT_EQ(written.crc32, crc32_hex("hello, world"));
    EXPECT_EQ(written.crc32, "ffab723a");  // zlib's CRC-32 of "hello, world"
  }
  EXPECT_EQ(read_file(dir / "a.bin"), "hello, world");
  {
    AtomicFileWriter abandoned(dir / "b.bin");
    abandoned.write("half");
  }
  EXPECT_FALSE(fs::exists(dir / "b.bin"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1u) << "a temporary file was left behind";
}

// A write never replaces what is not a regular file: a FIFO (standing in for /dev/null, which `loco fit --chart
// /dev/null` replaced with a PNG) or a directory is refused by name and left as it was, with no temporary file.
// Audit round 14: in a directory another user can write to, a link planted at the temporary file's predictable
// name (.NAME.tmp-PID, .loco-write-test-PID) made a root run truncate or overwrite the file it points to. The
// writers create their files new, never through what is there.
TEST(AtomicFileWriter, NeverWritesThroughALinkPlantedAtItsTemporaryName) {
  test::ScratchDir dir;
  const fs::path victim = dir / "victim.txt";
  test::write_text(victim, "precious");
  fs::create_symlink(victim, dir / fmt::format(".config.toml.tmp-{}", ::getpid()));
  fs::create_symlink(victim, dir / fmt::format(".loco-write-test-{}", ::getpid()));
  write_file_atomic(dir / "config.toml", "[model]\n");
  ensure_writable_directory(dir.path(), "train.out_dir");
  EXPECT_EQ(test::read_text(victim), "precious");
  EXPECT_EQ(test::read_text(dir / "config.toml"), "[model]\n");
  EXPECT_TRUE(fs::is_symlink(dir / fmt::format(".config.toml.tmp-{}", ::getpid())));  // left as it was found
  fs::path created;
  const int fd = create_new_file(dir.path(), ".config.toml.tmp-", created);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(created.filename().string().rfind(fmt::format(".config.toml.tmp-{}", ::getpid()), 0), 0u);
  EXPECT_NE(created.filename(), fmt::format(".config.toml.tmp-{}", ::getpid()));  // another name: digits after
  EXPECT_TRUE(fs::is_regular_file(created) && !fs::is_symlink(created));
}

TEST(AtomicFileWriter, RefusesToReplaceADeviceOrADirectory) {
  test::ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_directories(dir / "directory");
  for (const char* name : {"fifo", "directory"}) {
    try {
      write_file_atomic(dir / name, "png");
      ADD_FAILURE() << name << " was replaced";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name == std::string("fifo") ? "a FIFO" : "a directory") +
                                           ", and loco writes only regular files"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(dir / "fifo"));
  EXPECT_TRUE(fs::is_directory(dir / "directory"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 2u) << "a temporary file was left behind";
  write_file_atomic(dir / "file", "old");
  write_file_atomic(dir / "file", "new");  // a regular file is replaced, as always
  EXPECT_EQ(read_file(dir / "file"), "new");
}

// Out of file descriptors, a read or a write names the limit, not the path or the directory's permissions
// ("is not writable … fix its permissions", "Check the path").
TEST(AtomicFileWriter, OutOfFileDescriptorsNamesTheLimit) {
  test::ScratchDir dir;
  test::write_text(dir / "a.txt", "text");
  ensure_writable_directory(dir / "out", "train.out_dir");
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<std::string> said;
  {
    std::vector<int> held;  // every descriptor below the limit taken
    rlimit low = saved;
    low.rlim_cur = 64;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
    for (const auto& attempt : std::vector<std::function<void()>>{
             [&] { read_file(dir / "a.txt"); }, [&] { AtomicFileWriter writer(dir / "b.txt"); },
             [&] { ensure_writable_directory(dir / "out", "train.out_dir"); }}) {
      try {
        attempt();
        said.push_back("no error");
      } catch (const IoError& e) {
        said.push_back(e.what());
      }
    }
    for (const int fd : held) ::close(fd);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  }
  for (const std::string& message : said) {
    EXPECT_NE(message.find("no file descriptors left (ulimit -n): raise the limit"), std::string::npos) << message;
    EXPECT_EQ(message.find("permissions"), std::string::npos) << message;
  }
}

TEST(RemoveTree, RemovesNestedFilesAndDirectoriesButNotLinkTargets) {
  test::ScratchDir dir;
  test::write_text(dir / "tree" / "a" / "b" / "file.txt", "x");
  test::write_text(dir / "tree" / "top.txt", "y");
  test::write_text(dir / "outside" / "keep.txt", "z");
  fs::create_directory_symlink(dir / "outside", dir / "tree" / "a" / "link");
  std::error_code error;
  EXPECT_TRUE(remove_tree(dir / "tree", error)) << error.message();
  EXPECT_FALSE(fs::exists(dir / "tree"));
  EXPECT_TRUE(fs::exists(dir / "outside" / "keep.txt"));
}

TEST(RemoveTree, MissingPathIsNotAnError) {
  test::ScratchDir dir;
  std::error_code error;
  EXPECT_TRUE(remove_tree(dir / "never-made", error));
  EXPECT_FALSE(error);
}

TEST(RemoveTree, ReportsWhatCannotBeRemoved) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may remove files from a read-only directory";
  test::ScratchDir dir;
  test::write_text(dir / "locked" / "inner" / "file.txt", "x");
  fs::permissions(dir / "locked" / "inner", fs::perms::owner_read | fs::perms::owner_exec);
  std::error_code error;
  const bool removed = remove_tree(dir / "locked", error);
  fs::permissions(dir / "locked" / "inner", fs::perms::owner_all);
  EXPECT_FALSE(removed);
  EXPECT_TRUE(error);
}

// One claim on a directory at a time, also within one process; the claim ends with its holder (or its
// process), and goes with a move.
// What a stopped writer left is removed; what a writer at work has (two exports to one --out at once) is not:
// the later export removed the earlier one's directory under it.
TEST(RemoveInterruptedWrites, RemovesWhatStoppedWritersLeftOnly) {
  test::ScratchDir dir;
  const pid_t stopped = ::fork();
  if (stopped == 0) ::_exit(0);
  ASSERT_GT(stopped, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(stopped, &status, 0), stopped);
  const pid_t working = ::fork();  // another writer, alive until the test ends
  if (working == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(working, 0);
  const std::string at_work = ".out.partial-" + std::to_string(working);
  const std::string left = ".out.partial-" + std::to_string(stopped);
  const std::string mine = ".out.partial-" + std::to_string(::getpid());
  for (const std::string& name : {at_work, left, mine, std::string(".other.partial-1")}) {
    test::write_text(dir / name / "model.safetensors", "weights");
  }
  std::vector<std::string> removed = remove_interrupted_writes(
      dir.path(), [](const std::string& name) { return name == "out"; }, /*others_may_write=*/true);
  ::kill(working, SIGKILL);
  ::waitpid(working, &status, 0);
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected{left, mine};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  EXPECT_TRUE(fs::exists(dir / at_work / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / ".other.partial-1"));
  // Where one process writes at a time (a run's checkpoints, under its lock), every stopped write's goes.
  EXPECT_EQ(remove_interrupted_writes(dir.path(), [](const std::string& name) { return name == "out"; }),
            std::vector<std::string>{at_work});
}

TEST(DirectoryLock, ADirectoryIsClaimedByOneHolderAtATime) {
  test::ScratchDir scratch;
  std::optional<DirectoryLock> first(std::in_place, scratch.path(), "--out directory");
  try {
    DirectoryLock second(scratch.path(), "--out directory");
    ADD_FAILURE() << "a held directory was claimed again";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--out directory '" + scratch.path().string() +
                                         "' is being written by another loco process right now"),
              std::string::npos)
        << e.what();
  }
  DirectoryLock moved = std::move(*first);
  first.reset();  // the moved-from lock holds nothing: the claim stays with `moved`
  EXPECT_THROW(DirectoryLock(scratch.path(), "x"), ConfigError);
  fs::create_directories(scratch / "other");
  { DirectoryLock unrelated(scratch / "other", "x"); }  // another directory is another claim
  moved = DirectoryLock(scratch / "other", "x");        // moving another claim in lets go of this one
  EXPECT_NO_THROW(DirectoryLock(scratch.path(), "x"));
  EXPECT_THROW(DirectoryLock(scratch / "other", "x"), ConfigError);
}

}  // namespace
}  // namespace loco
