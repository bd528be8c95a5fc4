#include "loco/monitor/run_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <limits>
#include <system_error>

#include "loco/util/error.h"
#include "loco/util/utf8.h"

namespace loco::monitor {

namespace fs = std::filesystem;

namespace {

// A string field of a line read from a file, or "" (the line is read, not trusted).
std::string text_field(const nlohmann::json& object, const char* name) {
  const auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

// How long ago the file was last written (null when it cannot be read now).
nlohmann::json seconds_since_written(const fs::path& path) {
  std::error_code ec;
  const auto written = fs::last_write_time(path, ec);
  if (ec) return nullptr;
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - written).count();
}

}  // namespace

RunFiles::RunFiles(std::vector<fs::path> run_dirs) : run_dirs_(std::move(run_dirs)) {
  for (const fs::path& dir : run_dirs_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      throw ConfigError(fmt::format("'{}' is not a directory: give loco dashboard run directories (train.out_dir "
                                    "of each run)",
                                    dir.string()));
    }
  }
  discover();
}

// A run directory's metrics.jsonl, its subdirectories' (replica_r) and those of its members/ (an elastic
// run's members/NAME-n), as they appear.
void RunFiles::discover() {
  for (const fs::path& dir : run_dirs_) {
    std::vector<fs::path> candidates = {dir / "metrics.jsonl"};
    for (const fs::path& parent : {dir, dir / "members"}) {
      std::error_code ec;
      for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        if (it->is_directory(ec)) candidates.push_back(it->path() / "metrics.jsonl");
      }
    }
    for (const fs::path& path : candidates) {
      std::error_code ec;
      if (files_.count(path) != 0 || !fs::is_regular_file(path, ec)) continue;
      files_[path].series = path.parent_path().string();
    }
  }
}

void RunFiles::poll(MetricsHistory& history) {
  discover();
  for (auto& [path, file] : files_) read_new_lines(path, file, history);
}

void RunFiles::read_new_lines(const fs::path& path, File& file, MetricsHistory& history) {
  // Read through one descriptor, so that what is read is of the file whose size and identity were taken.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;  // gone for now (a resume replaces it atomically): read it when it is back
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return;
  }
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  const auto inode = static_cast<std::uint64_t>(st.st_ino);
  if (size < file.offset || (file.inode != 0 && inode != file.inode)) {
    // A resume rewrote it with the lines up to its step (another file, the same name): the series starts again
    // from the file. By its size alone a file rewritten past the old size was read on from the old offset:
    // the killed run's points stayed, and a torn last line was joined to a new one.
    history.clear(file.series);
    file.offset = 0;
    file.size_read = 0;
    file.skipping_line = false;
  }
  file.inode = inode;
  if (size == file.size_read) {  // nothing new: an unfinished line is not read again until it grows
    ::close(fd);
    return;
  }
  std::string chunk(static_cast<std::size_t>(std::min<std::uintmax_t>(size - file.offset, kMaxReadPerPoll)), '\0');
  std::size_t got = 0;
  while (got < chunk.size()) {
    const ssize_t n = ::pread(fd, chunk.data() + got, chunk.size() - got, static_cast<off_t>(file.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  chunk.resize(got);
  if (chunk.empty()) return;
  std::size_t begin = 0;
  for (std::size_t end; (end = chunk.find('\n', begin)) != std::string::npos; begin = end + 1) {
    // A line longer than kMaxLineBytes is skipped whether it arrived in pieces or in one read.
    if (!file.skipping_line && end - begin <= kMaxLineBytes) take_line(chunk.substr(begin, end - begin), file, history);
    file.skipping_line = false;
  }
  // What follows the last line end is read again with the rest of its line, unless it is already too long.
  // The file is read to its end when this read reached it: until it grows, the next poll reads nothing.
  file.size_read = file.offset + got == size ? size : 0;
  const std::size_t unfinished = chunk.size() - begin;
  if (file.skipping_line || unfinished > kMaxLineBytes) {
    file.offset += chunk.size();
    file.skipping_line = true;
  } else {
    file.offset += begin;
  }
}

// One metrics line: its point, against its elapsed_s; an elastic member's quorum and membership events.
void RunFiles::take_line(const std::string& line, File& file, MetricsHistory& history) {
  const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto point = point_from_record(record);
  if (!point) return;  // a torn or foreign line: metrics.jsonl is read, not trusted
  const double elapsed = point->values[metric_index("elapsed_s")];
  point->time_s = std::isnan(elapsed) ? 0 : elapsed;
  history.add(file.series, *point);
  if (const auto q = record.find("quorum_id"); q != record.end() && q->is_number_integer()) file.quorum_id = *q;
  const auto events = record.find("membership_events");
  if (events == record.end() || !events->is_array()) return;
  for (const auto& e : *events) {
    if (!e.is_object()) continue;
    events_.push_back({{"time_s", point->time_s},
                       {"kind", utf8_prefix(text_field(e, "kind"), kMaxEventKindBytes)},
                       {"detail", fmt::format("{} at step {}: {}", file.series, point->step,
                                              utf8_prefix(text_field(e, "detail"), kMaxEventDetailBytes))}});
    if (events_.size() > kMaxEvents) events_.pop_front();
  }
}

nlohmann::json RunFiles::status(const MetricsHistory& history) const {
  // The kMaxStatusMembers files written last, in path order: a directory of 5,000 members made a /status of
  // 1.1 MB, past the bound a slow reader may hold.
  std::vector<std::pair<nlohmann::json, const fs::path*>> by_age;  // age null: the file is gone, shown last
  for (const auto& [path, file] : files_) by_age.emplace_back(seconds_since_written(path), &path);
  const auto sooner = [](const auto& a, const auto& b) {
    const double inf = std::numeric_limits<double>::infinity();
    return (a.first.is_null() ? inf : a.first.template get<double>()) <
           (b.first.is_null() ? inf : b.first.template get<double>());
  };
  const std::size_t shown = std::min(by_age.size(), kMaxStatusMembers);
  std::partial_sort(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(shown), by_age.end(), sooner);
  by_age.resize(shown);
  std::sort(by_age.begin(), by_age.end(), [](const auto& a, const auto& b) { return *a.second < *b.second; });
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [age, path] : by_age) {
    const File& file = files_.at(*path);
    const auto latest = history.latest(file.series);
    nlohmann::json m = {{"name", file.series},
                        {"path", path->string()},
                        {"step", latest ? latest->step : 0},
                        {"updated_age_s", age},
                        {"metrics", latest ? report_json(*latest) : nlohmann::json::object()}};
    if (!file.quorum_id.is_null()) m["quorum_id"] = file.quorum_id;
    members.push_back(std::move(m));
  }
  return {{"source", "files"},
          {"members", std::move(members)},
          {"members_not_shown", files_.size() - shown},
          {"events", nlohmann::json(std::vector<nlohmann::json>(events_.begin(), events_.end()))}};
}

}  // namespace loco::monitor
