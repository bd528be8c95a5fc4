// Text that came from the network (names, run ids, a leave's reason), made safe for where it goes
// (docs/security.md): a name is plain or refused; anything else is escaped on its way into the
// coordinator's log, where a newline would let a sender write whole forged lines (a fake "commit ... step
// 999", which bench/chaos.py counts), and into its status page, where it would be markup.
#pragma once

#include <string>
#include <string_view>

namespace loco::membership {

inline constexpr std::size_t kMaxNameLength = 64;

// 1 to kMaxNameLength letters, digits, '.', '_' or '-': what member names and run ids may be. They end up
// in ids, logs, store prefixes and Prometheus labels.
bool plain_name(std::string_view name);
// One line of printable ASCII: control bytes, DEL, bytes above 127 and '\' as \xNN (and \\).
std::string loggable(std::string_view text);
// `text` with & < > " ' as HTML character references.
std::string html_escaped(std::string_view text);

}  // namespace loco::membership
