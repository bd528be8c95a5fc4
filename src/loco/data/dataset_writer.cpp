#include "loco/data/dataset_writer.h"

#include <fmt/format.h>

#include <utility>

#include "loco/util/error.h"

namespace loco::data {

DatasetWriter::DatasetWriter(const fs::path& dir, DocumentSplit split, bool hold_out, std::uint32_t bytes_per_token,
                             std::uint64_t tokens_per_shard)
    : split_(split),
      fallback_(hold_out),
      train_writer_(dir, "train", bytes_per_token, tokens_per_shard),
      val_writer_(dir, "val", bytes_per_token, tokens_per_shard) {}

void DatasetWriter::append(SplitWriter& writer, SplitMeta& meta, const EncodedDocument& document) {
  writer.append(document.tokens);
  meta.tokens += document.tokens.size();
  meta.documents += 1;
}

void DatasetWriter::write(EncodedDocument document) {
  const std::uint64_t hash = split_.hash(document.file, document.line);
  switch (fallback_.observe(hash, split_.in_validation(hash))) {
    case ValidationFallback::Role::validation:
      append(val_writer_, val_, document);
      if (held_) append(train_writer_, train_, *std::exchange(held_, std::nullopt));
      return;
    case ValidationFallback::Role::candidate:
      if (held_) append(train_writer_, train_, *held_);
      held_ = std::move(document);
      return;
    case ValidationFallback::Role::train:
      append(train_writer_, train_, document);
      return;
  }
}

DatasetWriter::Splits DatasetWriter::finish() {
  if (held_) append(val_writer_, val_, *std::exchange(held_, std::nullopt));
  const std::uint64_t documents = train_.documents + val_.documents;
  if (fallback_.holds_out() && documents == 1) throw single_document_error();
  if (train_.documents == 0) {
    throw DataError(fmt::format(
        "all {} documents fell in the validation split, none is left to train on. Pass a smaller --val-fraction "
        "(each document is held out with that probability) or add documents.",
        documents));
  }
  train_.shards = train_writer_.finish();
  val_.shards = val_writer_.finish();
  std::map<std::string, std::string> checksums = train_writer_.checksums();
  checksums.insert(val_writer_.checksums().begin(), val_writer_.checksums().end());
  return Splits{std::move(train_), std::move(val_), std::move(checksums)};
}

}  // namespace loco::data
