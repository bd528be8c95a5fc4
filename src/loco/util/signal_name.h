// A signal's name as people know it: "SIGTERM", "SIGINT" ("signal 64" where the C library has none).
#pragma once

#include <string>

namespace loco {

std::string signal_name(int signal);

}  // namespace loco
