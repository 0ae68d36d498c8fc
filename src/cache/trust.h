/** \file trust.h
 * Whether a cache directory may be trusted, and its secret. Cache entries are code the process
 * will load and run, so the cache root must belong to the user and be writable by no one else,
 * and every entry carries an HMAC (entry.h) keyed by a random secret kept in the root, readable
 * by the user only. Someone who can plant files elsewhere (a shared /tmp, a group-writable
 * directory) can then make a lookup miss, never run their code.
 */
#pragma once

#include <optional>
#include <string>

#include "cache/entry.h"

namespace metile {

/** The secret's file name inside the cache root (not an entry name, so pruning never sees it). */
inline constexpr const char* kCacheSecretName = "secret";

/** Why the existing directory `dir` cannot be trusted ("" when it can): not a directory, owned
 * by another user, or group- or world-writable. */
std::string untrusted_dir_reason(const std::string& dir);

/**
 * The secret of the cache in `dir`, created (32 random bytes, mode 0600, published atomically so
 * racing processes agree) when `create` and there is none. nullopt, with the reason in `*why`,
 * when it cannot be read or created, or when the file is not a regular file of the user's that
 * only the user can read.
 */
std::optional<MacKey> cache_secret(const std::string& dir, bool create, std::string* why);

}  // namespace metile
