#include "loco/train/metrics.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "loco/train/checkpoint.h"
#include "loco/util/error.h"
#include "loco/util/fs.h"

namespace loco {

namespace fs = std::filesystem;

MetricsWriter::MetricsWriter(const fs::path& out_dir, std::int64_t keep_through_step) : out_dir_(out_dir) {
  const fs::path path = out_dir / "metrics.jsonl";
  std::string kept;
  if (keep_through_step >= 0 && fs::exists(path)) {
    std::istringstream lines(read_file(path));
    for (std::string line; std::getline(lines, line);) {
      auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      // A torn last line (the run was killed mid-write) is dropped with the later steps.
      if (record.is_object() && record.contains("step") && record["step"].is_number_integer() &&
          record["step"].get<std::int64_t>() <= keep_through_step) {
        kept += line + "\n";
      }
    }
  }
  write_file_atomic(path, kept);
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) throw IoError(fmt::format("cannot open {} for appending", path.string()));
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    const int error = errno;
    const fs::path checkpoints = out_dir_ / "checkpoints";
    const bool checkpointed = !list_checkpoints(checkpoints).empty();
    // The fix of its errno (before: "Free space" for all, also past `ulimit -f`, where freeing space fixes nothing).
    throw IoError(fmt::format("cannot append to {}: {}. {}, then {}", (out_dir_ / "metrics.jsonl").string(),
                              std::strerror(error), fix_for_failed_write(error),
                              checkpointed ? fmt::format("resume from the last checkpoint in {}", checkpoints.string())
                                           : std::string("start the run again: it wrote no checkpoint yet (remove "
                                                         "what it wrote, or choose another train.out_dir)")));
  }
}

}  // namespace loco
