/** \file sha256.h
 * SHA-256 (FIPS 180-4), for compile-cache keys. Incremental: update() any number of times, then
 * finish() once.
 */
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace metile {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /** Pads, processes the last block and returns the digest; the object is spent afterwards. */
  Digest finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

/** HMAC-SHA256 (RFC 2104) of `data` under `key`. */
Sha256::Digest hmac_sha256(const uint8_t* key, size_t key_size, const uint8_t* data, size_t size);

/** Lowercase hex of arbitrary bytes. */
std::string to_hex(const uint8_t* data, size_t size);
inline std::string to_hex(const Sha256::Digest& d) { return to_hex(d.data(), d.size()); }

/** sha256 of `data` as 64 lowercase hex digits. */
std::string sha256_hex(std::string_view data);

}  // namespace metile
