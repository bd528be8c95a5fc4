// Encoding on all cores with the output order fixed: batches of documents go to worker threads,
// each parses its documents (JSONL) and encodes them as [BOS] + tokens + [EOS] through its own
// CachedEncoder, and the caller takes the encoded batches back in the order it submitted them, so
// the shards are the same bytes for any number of threads. The caller bounds memory by taking a
// batch back before submitting more (in_flight()).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loco/data/corpus_stream.h"
#include "loco/data/tokenizer.h"

namespace loco::data {

struct EncodedDocument {
  std::uint32_t file = 0;
  std::uint64_t line = 0;
  std::vector<std::uint32_t> tokens;  // [BOS] + ids + [EOS]
};

class EncodePipeline {
 public:
  EncodePipeline(const Tokenizer& tokenizer, const std::vector<CorpusFile>& files, std::string text_field,
                 unsigned threads);
  ~EncodePipeline();  // stops the workers after the batch each is on
  EncodePipeline(const EncodePipeline&) = delete;
  EncodePipeline& operator=(const EncodePipeline&) = delete;

  void submit(std::vector<RawDocument> batch);

  // Batches submitted and not yet taken.
  std::uint64_t in_flight() const { return next_submit_ - next_take_; }

  // The next batch in submission order (documents whose text is blank left out), waiting for it;
  // rethrows the first error met in it (a bad JSONL line: FILE:LINE).
  std::vector<EncodedDocument> take();

 private:
  struct Result {
    std::vector<EncodedDocument> documents;
    std::exception_ptr error;
  };

  void work();
  void stop();
  std::vector<EncodedDocument> encode_batch(std::vector<RawDocument>& batch, class CachedEncoder& encoder) const;

  const Tokenizer& tokenizer_;
  bool by_words_;               // CachedEncoder::exact_by_words(tokenizer_)
  std::size_t words_per_cache_;  // the caches of all threads together hold at most 2^20 words
  const std::vector<CorpusFile>& files_;
  std::string text_field_;
  std::mutex mutex_;
  std::condition_variable work_ready_, result_ready_;
  std::deque<std::pair<std::uint64_t, std::vector<RawDocument>>> queue_;
  std::map<std::uint64_t, Result> results_;
  std::uint64_t next_submit_ = 0, next_take_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace loco::data
