// c10d reports failures as c10::Error or std::runtime_error with a message; loco's callers need a
// typed error (comm_error.h) with one line of cause and no C++ backtrace (docs/design.md §4).
#pragma once

#include <exception>
#include <initializer_list>
#include <string>

namespace loco::comm {

// The exception's message without libtorch's backtrace: its first line.
std::string first_line(const std::exception& e);

bool mentions_any(const std::string& text, std::initializer_list<const char*> words);

// Throws CommTimeout for a timeout; PeerLost for a closed connection once the group is up
// (`group_is_up`; during rendezvous a refused or closed connection is a setup failure, CommError);
// CommError otherwise. `context` names the operation and rank.
[[noreturn]] void throw_typed(const std::exception& e, const std::string& context, bool group_is_up);

}  // namespace loco::comm
