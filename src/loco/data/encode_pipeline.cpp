#include "loco/data/encode_pipeline.h"

#include <algorithm>

#include "loco/data/cached_encoder.h"
#include "loco/data/text.h"

namespace loco::data {

EncodePipeline::EncodePipeline(const Tokenizer& tokenizer, const std::vector<CorpusFile>& files,
                               std::string text_field, unsigned threads)
    : tokenizer_(tokenizer),
      by_words_(CachedEncoder::exact_by_words(tokenizer)),
      words_per_cache_((std::size_t{1} << 20) / std::max(1u, threads)),
      files_(files),
      text_field_(std::move(text_field)) {
  try {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    stop();  // threads already started must be joined before they are destroyed
    throw;
  }
}

EncodePipeline::~EncodePipeline() { stop(); }

void EncodePipeline::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void EncodePipeline::submit(std::vector<RawDocument> batch) {
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(next_submit_++, std::move(batch));
  }
  work_ready_.notify_one();
}

std::vector<EncodedDocument> EncodePipeline::take() {
  Result result;
  {
    std::unique_lock lock(mutex_);
    result_ready_.wait(lock, [&] { return results_.count(next_take_) != 0; });
    auto found = results_.find(next_take_++);
    result = std::move(found->second);
    results_.erase(found);
  }
  if (result.error) std::rethrow_exception(result.error);
  return std::move(result.documents);
}

void EncodePipeline::work() {
  CachedEncoder encoder(tokenizer_, by_words_, words_per_cache_);
  for (;;) {
    std::pair<std::uint64_t, std::vector<RawDocument>> batch;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    Result result;
    try {
      result.documents = encode_batch(batch.second, encoder);
    } catch (...) {
      result.error = std::current_exception();
    }
    batch.second = {};  // the raw text is not needed any more
    {
      std::lock_guard lock(mutex_);
      results_.emplace(batch.first, std::move(result));
    }
    result_ready_.notify_all();
  }
}

std::vector<EncodedDocument> EncodePipeline::encode_batch(std::vector<RawDocument>& batch,
                                                          CachedEncoder& encoder) const {
  std::vector<EncodedDocument> encoded;
  encoded.reserve(batch.size());
  for (RawDocument& document : batch) {
    std::string text = document_text(std::move(document), files_, text_field_);
    document.bytes = {};
    if (is_blank(text)) continue;
    EncodedDocument out{document.file, document.line, {}};
    out.tokens.push_back(tokenizer_.bos_id());
    encoder.encode(text, out.tokens);
    out.tokens.push_back(tokenizer_.eos_id());
    encoded.push_back(std::move(out));
  }
  return encoded;
}

}  // namespace loco::data
