#include "loco/data/hf_tokenizer.h"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "loco/data/sentencepiece_tokenizer.h"

namespace loco::data {

namespace {

using Json = nlohmann::json;
using Type = VocabularyPiece::Type;

constexpr const char* kSpaceMark = "\xE2\x96\x81";  // "▁", sentencepiece's space

bool starts_character(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) != 0x80; }

Json replace(const std::string& pattern, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", {{"String", pattern}}}, {"content", content}};
}

// BOS before the text; a pair of texts (which loco never makes) gets a BOS before each.
Json bos_first(const std::string& bos, std::uint32_t bos_id) {
  auto special = [&](int type_id) { return Json{{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}}; };
  auto sequence = [](const char* id, int type_id) { return Json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  return {{"type", "TemplateProcessing"},
          {"single", {special(0), sequence("A", 0)}},
          {"pair", {special(0), sequence("A", 0), special(1), sequence("B", 1)}},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

}  // namespace

std::vector<std::pair<std::string, std::string>> bpe_merges(const std::vector<VocabularyPiece>& pieces) {
  std::unordered_map<std::string_view, std::size_t> normal_ids;
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].type == Type::normal) normal_ids.emplace(pieces[id].text, id);
  }
  struct Merge {
    float score;
    std::size_t joined, left, right;
  };
  std::vector<Merge> merges;
  for (const auto& [text, joined] : normal_ids) {
    for (std::size_t cut = 1; cut < text.size(); ++cut) {
      if (!starts_character(text[cut])) continue;
      auto left = normal_ids.find(text.substr(0, cut));
      auto right = normal_ids.find(text.substr(cut));
      if (left != normal_ids.end() && right != normal_ids.end()) {
        merges.push_back({pieces[joined].score, joined, left->second, right->second});
      }
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(b.score, a.joined, a.left) < std::tie(a.score, b.joined, b.left);
  });
  std::vector<std::pair<std::string, std::string>> ordered;
  ordered.reserve(merges.size());
  for (const Merge& m : merges) ordered.emplace_back(pieces[m.left].text, pieces[m.right].text);
  return ordered;
}

HfTokenizerFiles hf_tokenizer_files(const Tokenizer& tokenizer, std::int64_t model_max_length) {
  const std::vector<VocabularyPiece> pieces = tokenizer.vocabulary();
  const bool sentencepiece = tokenizer.kind() == kSentencePieceKind;

  Json vocab = Json::object();
  Json added_tokens = Json::array();
  std::string unknown;
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    const VocabularyPiece& piece = pieces[id];
    vocab[piece.text] = id;
    if (piece.type == Type::unknown) unknown = piece.text;
    if (piece.type == Type::unknown || piece.type == Type::control) {
      added_tokens.push_back({{"id", id},
                              {"content", piece.text},
                              {"single_word", false},
                              {"lstrip", false},
                              {"rstrip", false},
                              {"normalized", false},
                              {"special", true}});
    }
  }
  Json merges = Json::array();
  // "left right": the form every version of `tokenizers` reads; no piece holds a space (it is "▁").
  if (sentencepiece) {
    for (const auto& [left, right] : bpe_merges(pieces)) merges.push_back(left + " " + right);
  }
  const std::string& bos = pieces.at(tokenizer.bos_id()).text;
  const std::string& eos = pieces.at(tokenizer.eos_id()).text;

  HfTokenizerFiles files;
  files.tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", sentencepiece ? replace(" ", kSpaceMark) : Json(nullptr)},
      {"pre_tokenizer", nullptr},
      {"post_processor", bos_first(bos, tokenizer.bos_id())},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", {replace(kSpaceMark, " "), Json{{"type", "ByteFallback"}}, Json{{"type", "Fuse"}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", unknown.empty() ? Json(nullptr) : Json(unknown)},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", merges}}}};
  files.special_tokens_map = {{"bos_token", bos}, {"eos_token", eos}};
  if (!unknown.empty()) files.special_tokens_map["unk_token"] = unknown;
  // PreTrainedTokenizerFast takes tokenizer.json as it is; a Llama tokenizer class would put back the
  // dummy prefix loco's tokenizers do not have. Decoding must not "clean up" spaces before punctuation.
  files.tokenizer_config = files.special_tokens_map;
  files.tokenizer_config.update({{"tokenizer_class", "PreTrainedTokenizerFast"},
                                 {"model_max_length", model_max_length},
                                 {"clean_up_tokenization_spaces", false},
                                 // loco encodes "<s>" in a text as its characters; Hugging Face reads it as BOS
                                 // unless told to split special tokens (transformers is; tokenizers.js is not).
                                 {"split_special_tokens", true},
                                 {"add_bos_token", true},
                                 {"add_eos_token", false}});
  return files;
}

}  // namespace loco::data
