// SHA-256 through OpenSSL's libcrypto (docs/dependencies.md): the hash elastic members vote on and check
// a state transfer against (docs/fault-tolerance.md "Healing"). A cryptographic hash, unlike the FNV-1a
// of dist.check_sync: a peer cannot craft a different state with the same hash. No OpenSSL header here,
// so that includers do not need one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace loco::membership {

using Sha256Digest = std::array<std::uint8_t, 32>;

// Incremental: update() any number of times, then digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(const void* data, std::size_t size);
  Sha256Digest digest();

 private:
  evp_md_ctx_st* context_;
};

Sha256Digest sha256(std::string_view bytes);
// Lower-case hex, 64 characters.
std::string to_hex(const Sha256Digest& digest);

}  // namespace loco::membership
