// `loco dashboard`'s source (docs/dashboard.md): the metrics.jsonl files of run directories, read as they grow,
// never written. Each RUN_DIR gives a series for its own metrics.jsonl and one for each of its subdirectories
// that has one (replica_r of a static run) and each of RUN_DIR/members/ (NAME-n, an elastic run's members),
// named by path.
//
// Reading is bounded: each poll reads at most kMaxReadPerPoll new bytes of a file (the rest at the next poll),
// skips a line longer than kMaxLineBytes, and holds no line not ended yet (it is read again once more came). The newest
// kMaxEvents membership events are kept, each cut to a kind of kMaxEventKindBytes and a detail of kMaxEventDetailBytes
// (the coordinator's are a few dozen bytes), so a /status answer stays under ~250 KB whatever the files hold.
// A file that shrank was rewritten by a resume (metrics.h keeps the lines up to the resumed step): its series
// starts again.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "loco/monitor/metrics_history.h"

namespace loco::monitor {

class RunFiles {
 public:
  static constexpr std::size_t kMaxReadPerPoll = 4 << 20;
  static constexpr std::size_t kMaxLineBytes = 1 << 20;
  static constexpr std::size_t kMaxEvents = 200;
  static constexpr std::size_t kMaxStatusMembers = 256;  // rows of a /status answer: the files written last
  static constexpr std::size_t kMaxEventKindBytes = 32;
  static constexpr std::size_t kMaxEventDetailBytes = 1024;

  // ConfigError when a directory does not exist (a run not started yet may have no metrics.jsonl: it is
  // read once it appears).
  explicit RunFiles(std::vector<std::filesystem::path> run_dirs);

  // Reads what the files gained since the last poll into `history`.
  void poll(MetricsHistory& history);
  // {"source": "files", "members": [{"name", "path", "step", "updated_age_s" (since the file was last
  //  written), "quorum_id"?,
  //  "metrics": {…}}], "events": [{"time_s", "kind", "detail"}]}: the page's table and timeline.
  nlohmann::json status(const MetricsHistory& history) const;

 private:
  struct File {
    std::string series;
    std::uintmax_t offset = 0;
    std::uint64_t inode = 0;    // the file read so far (a resume replaces it with another)
    // A line not ended yet is not held (with thousands of files, a megabyte each was gigabytes): `offset` stays at
    // its start, and it is read again once the file has grown past `size_read`.
    std::uintmax_t size_read = 0;
    bool skipping_line = false;  // inside a line longer than kMaxLineBytes
    nlohmann::json quorum_id;    // an elastic member's, from its last line
  };

  void discover();
  void read_new_lines(const std::filesystem::path& path, File& file, MetricsHistory& history);
  void take_line(const std::string& line, File& file, MetricsHistory& history);

  std::vector<std::filesystem::path> run_dirs_;
  std::map<std::filesystem::path, File> files_;
  std::deque<nlohmann::json> events_;
};

}  // namespace loco::monitor
