// Writes encoded documents, in corpus order, into the train and val shards of a prepared directory,
// each to the split DocumentSplit gives it. The candidate of the tiny-corpus rule (ValidationFallback
// in document_split.h) is held back: finish() moves it to val if no document ever fell there;
// otherwise it is written to train when it stops being the candidate, so each split keeps the corpus
// order except for that one held document.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "loco/data/dataset_meta.h"
#include "loco/data/document_split.h"
#include "loco/data/encode_pipeline.h"
#include "loco/data/shard.h"

namespace loco::data {

class DatasetWriter {
 public:
  // `hold_out`: val_fraction > 0, so val must end with at least one document.
  DatasetWriter(const fs::path& dir, DocumentSplit split, bool hold_out, std::uint32_t bytes_per_token,
                std::uint64_t tokens_per_shard);

  void write(EncodedDocument document);
  std::uint64_t documents() const { return train_.documents + val_.documents + (held_ ? 1 : 0); }

  struct Splits {
    SplitMeta train, val;
    std::map<std::string, std::string> checksums;  // every shard of both splits
  };
  // Finishes the shards. DataError when a split the run needs ends without documents.
  Splits finish();

 private:
  void append(SplitWriter& writer, SplitMeta& meta, const EncodedDocument& document);

  DocumentSplit split_;
  ValidationFallback fallback_;
  SplitWriter train_writer_, val_writer_;
  SplitMeta train_, val_;
  std::optional<EncodedDocument> held_;  // the fallback's candidate
};

}  // namespace loco::data
