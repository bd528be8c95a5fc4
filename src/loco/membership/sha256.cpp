#include "loco/membership/sha256.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <stdexcept>

namespace loco::membership {
namespace {

// Failures here mean OpenSSL itself is broken (out of memory, a FIPS policy without SHA-256).
void require(int ok, const char* call) {
  if (ok != 1) throw std::runtime_error(fmt::format("OpenSSL {} failed while computing a SHA-256", call));
}

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (context_ == nullptr) throw std::runtime_error("OpenSSL EVP_MD_CTX_new failed");
  require(EVP_DigestInit_ex(context_, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_); }

Sha256& Sha256::update(const void* data, std::size_t size) {
  if (size > 0) require(EVP_DigestUpdate(context_, data, size), "EVP_DigestUpdate");
  return *this;
}

Sha256Digest Sha256::digest() {
  Sha256Digest out{};
  unsigned int length = 0;
  require(EVP_DigestFinal_ex(context_, out.data(), &length), "EVP_DigestFinal_ex");
  return out;
}

Sha256Digest sha256(std::string_view bytes) { return Sha256().update(bytes.data(), bytes.size()).digest(); }

std::string to_hex(const Sha256Digest& digest) {
  std::string out;
  out.reserve(2 * digest.size());
  for (const std::uint8_t byte : digest) out += fmt::format("{:02x}", byte);
  return out;
}

}  // namespace loco::membership
