// The tokenizer of a Hugging Face export, in the files Hugging Face's libraries read: tokenizer.json in the
// format of the `tokenizers` library (what AutoTokenizer, transformers.js and tokenizers.js load), with
// tokenizer_config.json and special_tokens_map.json beside it.
//
// Note "hf-tokenizer": both of loco's tokenizers become a BPE model with byte fallback that encodes text to
// the ids loco's own encode gives, with BOS first (as every document and prompt starts in loco):
// - sentencepiece BPE keeps no list of merges: it joins the adjacent pair whose joined piece is in the
//   vocabulary and scores highest. Every split of a piece into two pieces of the vocabulary is such a pair;
//   ranked by the joined piece's score, Hugging Face's lowest-rank-first joins them in the same order.
//   loco's settings (identity normalization, no dummy prefix) leave one normalization step: a space is "▁".
// - the byte tokenizer is a vocabulary of the 256 byte pieces alone and no merges: every character falls
//   back to its bytes, id = byte.
// One difference stays: the special tokens' names in a text ("<s>", "</s>", "<unk>") are read by Hugging Face as
// those tokens, as by every Hugging Face Llama tokenizer, where loco encodes their characters;
// tokenizer_config.json asks transformers to split them (split_special_tokens), which tokenizers.js ignores.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "loco/data/tokenizer.h"

namespace loco::data {

struct HfTokenizerFiles {
  nlohmann::json tokenizer;           // tokenizer.json
  nlohmann::json tokenizer_config;    // tokenizer_config.json
  nlohmann::json special_tokens_map;  // special_tokens_map.json
};

// `model_max_length`: the longest input the model takes (its max_position_embeddings).
HfTokenizerFiles hf_tokenizer_files(const Tokenizer& tokenizer, std::int64_t model_max_length);

// The merges of a sentencepiece BPE vocabulary, best first: each way to split a normal piece into two normal
// pieces, ranked by the joined piece's score (higher first), then its id, then the left piece's id.
std::vector<std::pair<std::string, std::string>> bpe_merges(const std::vector<VocabularyPiece>& pieces);

}  // namespace loco::data
