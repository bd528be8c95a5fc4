// Encoding documents on all cores: tokenization is most of `loco prepare`'s time after training,
// and both tokenizers encode from const methods that are safe to call from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loco/data/tokenizer.h"

namespace loco::data {

// [BOS] + encode(text) + [EOS] for each text, in the order of `texts`.
std::vector<std::vector<std::uint32_t>> encode_documents(const Tokenizer& tokenizer,
                                                         const std::vector<std::string>& texts);

}  // namespace loco::data
