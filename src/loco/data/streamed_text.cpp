#include "loco/data/streamed_text.h"

#include "loco/util/utf8.h"

namespace loco::data {

namespace {

// The length of `text` without a trailing U+FFFD and without a trailing incomplete UTF-8 sequence.
std::size_t complete_length(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::size_t end = text.size();
  while (end >= kReplacement.size() && text.compare(end - kReplacement.size(), kReplacement.size(), kReplacement) == 0) {
    end -= kReplacement.size();
  }
  // The last lead byte among the last four, and whether the bytes after it complete its character.
  for (std::size_t back = 1; back <= 4 && back <= end; ++back) {
    const auto byte = static_cast<unsigned char>(text[end - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte
    const std::size_t needs = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return back < needs && needs > 1 ? end - back : end;
  }
  return end;
}

}  // namespace

std::string StreamedText::show(const std::vector<std::uint32_t>& ids, bool last) {
  std::string text = tokenizer_.decode(ids);
  if (!last) text.resize(complete_length(text));
  text = replace_invalid_utf8(text);
  if (text.compare(0, shown_.size(), shown_) != 0) {
    if (!last) return "";
    shown_ = text;
    return "\n" + text;
  }
  std::string added = text.substr(shown_.size());
  shown_ = std::move(text);
  return added;
}

}  // namespace loco::data
