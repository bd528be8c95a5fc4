#include "loco/data/parallel_encode.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

namespace loco::data {

std::vector<std::vector<std::uint32_t>> encode_documents(const Tokenizer& tokenizer,
                                                         const std::vector<std::string>& texts) {
  std::vector<std::vector<std::uint32_t>> encoded(texts.size());
  // Documents differ wildly in length: threads take the next one as they finish, not fixed blocks.
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < texts.size(); i = next++) {
      std::vector<std::uint32_t> ids = tokenizer.encode(texts[i]);
      encoded[i].reserve(ids.size() + 2);
      encoded[i].push_back(tokenizer.bos_id());
      encoded[i].insert(encoded[i].end(), ids.begin(), ids.end());
      encoded[i].push_back(tokenizer.eos_id());
    }
  };
  unsigned threads = std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), texts.size());
  std::vector<std::future<void>> helpers;
  for (unsigned t = 1; t < threads; ++t) helpers.push_back(std::async(std::launch::async, work));
  work();
  for (auto& helper : helpers) helper.get();  // rethrows a helper's exception
  return encoded;
}

}  // namespace loco::data
