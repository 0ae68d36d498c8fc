/** \file entry.h
 * The on-disk format of one cache entry, independent of where it is stored:
 *
 *   offset size
 *   0      4    magic "MTLC"
 *   4      4    format version (u32, little-endian like every field)
 *   8      32   the full key (sha256 digest)
 *   40     4    payload kind (PayloadKind)
 *   44     8    raw payload size
 *   52     8    compressed size (the rest of the file)
 *   60     4    crc32 of the raw payload (zlib's crc32)
 *   64     ...  zlib stream of the raw payload
 *   end-32 32   HMAC-SHA256 of everything before it, keyed by the cache directory's secret
 *
 * The HMAC makes an entry that someone else wrote into the directory (right key and crc, but no
 * access to the user's secret) a miss: entries are code the process will run.
 * A reader accepts an entry only when every field matches what it expects and the stream inflates
 * to exactly the recorded size with the recorded crc; anything else (truncation, bit rot, a file
 * from another version or another key) is reported as "not usable", never as an error.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/artifact.h"

namespace metile {

/** Bumped whenever the layout above or a payload encoding changes; part of every key. */
inline constexpr uint32_t kCacheFormatVersion = 3;
inline constexpr size_t kEntryHeaderSize = 64;
inline constexpr size_t kEntryMacSize = 32;

enum class PayloadKind : uint32_t { artifact = 1, autotune = 2 };

using Bytes = std::vector<uint8_t>;
using KeyDigest = std::array<uint8_t, 32>;
/** The per-user secret that keys entry HMACs (trust.h). */
using MacKey = std::array<uint8_t, 32>;

/** zlib's crc32 of `data`. */
uint32_t crc32_of(std::span<const uint8_t> data);

/** Header + zlib stream of `raw` + HMAC under `mac`. `level` is zlib's (1 fastest .. 9 smallest). */
Bytes encode_entry(const KeyDigest& key, PayloadKind kind, std::span<const uint8_t> raw,
                   const MacKey& mac, uint32_t format_version = kCacheFormatVersion, int level = 6);
/** The raw payload when `file` is a valid entry for exactly (key, kind, version) whose HMAC
 * under `mac` matches; else nullopt. */
std::optional<Bytes> decode_entry(std::span<const uint8_t> file, const KeyDigest& key,
                                  PayloadKind kind, const MacKey& mac,
                                  uint32_t format_version = kCacheFormatVersion);

/** An artifact plus what the cache records about how it was made. */
struct CachedArtifact {
  Artifact artifact;
  double build_seconds = 0;  // the original build time, reported as "compile seconds saved"
};

/** The artifact payload stores its kind and its stages by name (kArtifactKindNames,
 * kStageNames), so renumbering those enums keeps entries readable; renaming a row does not. */
Bytes serialize_artifact(const CachedArtifact& a);
std::optional<CachedArtifact> deserialize_artifact(std::span<const uint8_t> raw);

/** An autotune record: the caller's key text (checked on lookup) and the winner. */
Bytes serialize_autotune(std::string_view key, std::string_view winner);
std::optional<std::string> deserialize_autotune(std::span<const uint8_t> raw, std::string_view key);

/** 64 hex digits -> digest; nullopt for anything else. */
std::optional<KeyDigest> parse_key_hex(std::string_view hex);

}  // namespace metile
