#include "loco/comm/c10d/c10d_errors.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "loco/comm/comm_error.h"

namespace loco::comm {

std::string first_line(const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = torch_error != nullptr ? torch_error->what_without_backtrace() : e.what();
  if (const auto end = text.find('\n'); end != std::string::npos) text.resize(end);
  return text;
}

bool mentions_any(const std::string& text, std::initializer_list<const char*> words) {
  for (const char* word : words) {
    if (text.find(word) != std::string::npos) return true;
  }
  return false;
}

void throw_typed(const std::exception& e, const std::string& context, bool group_is_up) {
  const std::string reason = first_line(e);
  if (mentions_any(reason, {"imed out", "imeout"})) {
    throw CommTimeout(
        fmt::format("{} timed out: a peer is stalled or too slow, or did not start the same operation "
                    "({}). Raise the timeout if peers are only slow.",
                    context, reason));
  }
  if (group_is_up &&
      mentions_any(reason, {"closed", "reset by peer", "Broken pipe", "Connection refused", "EOF", "ECONNRESET"})) {
    throw PeerLost(fmt::format("{} failed: a peer left the group ({}).", context, reason));
  }
  throw CommError(fmt::format("{} failed: {}", context, reason));
}

}  // namespace loco::comm
