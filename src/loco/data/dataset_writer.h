// Writes encoded documents, in corpus order, into the train and val shards of a prepared directory,
// each to the split DocumentSplit gives it. While no document has fallen in val, the train document
// of smallest hash is held back; finish() moves it to val if none ever did (a tiny corpus), and
// otherwise it was written to train when the first val document came (document_split.h).
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
  bool hold_out_;
  SplitWriter train_writer_, val_writer_;
  SplitMeta train_, val_;
  std::optional<EncodedDocument> held_;  // the train document of smallest hash while val is empty
  std::uint64_t held_hash_ = 0;
};

}  // namespace loco::data
