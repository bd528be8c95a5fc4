#include "loco/data/tokenizer_sample.h"

#include <algorithm>

#include "loco/data/document_split.h"
#include "loco/util/portable_random.h"

namespace loco::data {

namespace {

constexpr std::uint64_t kSampleStream = 0x73616d706c65;  // "sample"

}  // namespace

TokenizerSample::TokenizerSample(std::uint64_t budget_bytes, std::uint64_t seed)
    : budget_(budget_bytes), key_(mix_seed(seed, kSampleStream)) {}

std::uint64_t TokenizerSample::priority(std::uint32_t file, std::uint64_t line) const {
  return document_hash(key_, file, line);
}

void TokenizerSample::offer(std::uint64_t priority, std::string text) {
  if (!wants(priority)) return;
  if (const std::uint64_t most = std::max<std::uint64_t>(budget_ / kMaxShare, 1); text.size() > most) {
    const std::size_t newline = text.rfind('\n', most);
    text.resize(newline != std::string::npos && newline > 0 ? newline : most);
  }
  bytes_ += text.size();
  documents_.push_back(Entry{priority, std::move(text)});
  std::push_heap(documents_.begin(), documents_.end());
  while (bytes_ > budget_) {
    std::pop_heap(documents_.begin(), documents_.end());
    cutoff_ = std::min(cutoff_, documents_.back().priority);
    bytes_ -= documents_.back().text.size();
    documents_.pop_back();
  }
}

void TokenizerSample::remove(std::uint64_t priority) {
  auto found = std::find_if(documents_.begin(), documents_.end(),
                            [&](const Entry& entry) { return entry.priority == priority; });
  if (found == documents_.end()) return;
  bytes_ -= found->text.size();
  documents_.erase(found);
  std::make_heap(documents_.begin(), documents_.end());
}

std::vector<std::string> TokenizerSample::take_texts() {
  std::sort_heap(documents_.begin(), documents_.end());
  std::vector<std::string> texts;
  texts.reserve(documents_.size());
  for (auto& entry : documents_) texts.push_back(std::move(entry.text));
  documents_.clear();
  bytes_ = 0;
  return texts;
}

}  // namespace loco::data
