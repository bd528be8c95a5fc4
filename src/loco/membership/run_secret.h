// The run's secret (docs/security.md): the coordinator and every member hold it; it proves membership in
// joins and keys every message (authentication.h), and never crosses the wire. Members and
// `loco coordinator` read it from the environment:
//
//   LOCO_RUN_SECRET_FILE   a file holding it (refused when users other than its owner may read it)
//   LOCO_RUN_SECRET        the secret itself (a process's environment can be read by the same user)
//
// A secret has at least kMinimumSecretCharacters characters; new ones are 64 hex digits (32 random bytes).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace loco::membership {

inline constexpr std::size_t kMinimumSecretCharacters = 16;

// The secret the environment names, or nullopt when it names none. ConfigError for a file that cannot be
// read, that others may read, or a secret that is too short; naming the variable and the fix.
std::optional<std::string> run_secret_from_environment();

// The secret held in `file` (trailing whitespace dropped); ConfigError as above, naming `what`.
std::string read_secret_file(const std::filesystem::path& file, const std::string& what);

// A fresh secret.
std::string new_run_secret();

// Writes `secret` to `file`, readable by its owner only; IoError when it cannot. The file is created,
// never overwritten.
void create_secret_file(const std::filesystem::path& file, const std::string& secret);

}  // namespace loco::membership
