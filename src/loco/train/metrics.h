// metrics.jsonl (docs/design.md §3 "Metrics"): one JSON object per logged step, flushed line by line so
// a crashed run keeps everything it logged. On resume, lines after the resumed step are dropped so
// the file reads as one uninterrupted run.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

namespace loco {

class MetricsWriter {
 public:
  // Opens OUT_DIR/metrics.jsonl; keeps only lines with step <= keep_through_step (−1: start fresh;
  // the trainer refuses a fresh run over another run's metrics before getting here).
  MetricsWriter(const std::filesystem::path& out_dir, std::int64_t keep_through_step);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const nlohmann::json& record);

 private:
  std::filesystem::path out_dir_;
  std::FILE* file_ = nullptr;
};

}  // namespace loco
