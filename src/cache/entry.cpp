#include "cache/entry.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "support/error.h"
#include "support/sha256.h"

namespace metile {

namespace {

constexpr uint8_t kMagic[4] = {'M', 'T', 'L', 'C'};
// deflate never expands a stream by more than ~0.03% plus a few bytes, and never compresses by
// more than 1032:1, so a header claiming more is corrupt (and must not make us allocate it).
constexpr uint64_t kMaxRatio = 1032;

class Writer {
 public:
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void bytes(const void* p, size_t n) {
    u64(n);
    raw(p, n);
  }
  void str(std::string_view s) { bytes(s.data(), s.size()); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  Bytes out;

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
};

// Reads fields in order; any overrun sets `bad` and yields zeros, so callers check once at the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  double f64() {
    uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::span<const uint8_t> bytes() {
    uint64_t n = u64();
    return take(n);
  }
  std::string str() {
    auto b = bytes();
    return std::string(b.begin(), b.end());
  }
  std::span<const uint8_t> take(uint64_t n) {
    if (bad || n > in_.size() - pos_) {
      bad = true;
      return {};
    }
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  bool at_end() const { return pos_ == in_.size(); }
  bool bad = false;

 private:
  uint64_t le(int n) {
    auto b = take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < b.size(); ++i) v |= uint64_t{b[i]} << (8 * i);
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

// zlib counts in uInt; feed large buffers in pieces so payloads past 4 GiB still work.
uInt clamp_uint(size_t n) { return static_cast<uInt>(std::min<size_t>(n, UINT_MAX)); }

}  // namespace

uint32_t crc32_of(std::span<const uint8_t> data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (!data.empty()) {
    uInt n = clamp_uint(data.size());
    crc = crc32(crc, data.data(), n);
    data = data.subspan(n);
  }
  return static_cast<uint32_t>(crc);
}

Bytes encode_entry(const KeyDigest& key, PayloadKind kind, std::span<const uint8_t> raw,
                   const MacKey& mac, uint32_t format_version, int level) {
  z_stream z{};
  if (deflateInit(&z, level) != Z_OK) fail(METILE_ERROR_INTERNAL, "cache", "deflateInit failed");
  Bytes out(kEntryHeaderSize + deflateBound(&z, raw.size()));
  z.next_in = const_cast<Bytef*>(raw.data());
  z.next_out = out.data() + kEntryHeaderSize;
  size_t in_left = raw.size();
  size_t out_left = out.size() - kEntryHeaderSize;
  int rc = Z_OK;
  while (rc == Z_OK) {
    uInt in_now = clamp_uint(in_left), out_now = clamp_uint(out_left);
    z.avail_in = in_now;
    z.avail_out = out_now;
    rc = deflate(&z, in_now == in_left ? Z_FINISH : Z_NO_FLUSH);
    in_left -= in_now - z.avail_in;
    out_left -= out_now - z.avail_out;
  }
  deflateEnd(&z);
  if (rc != Z_STREAM_END) fail(METILE_ERROR_INTERNAL, "cache", "deflate failed (", rc, ")");
  size_t compressed = out.size() - kEntryHeaderSize - out_left;
  out.resize(kEntryHeaderSize + compressed);

  Writer h;
  h.raw(kMagic, 4);
  h.u32(format_version);
  h.raw(key.data(), key.size());
  h.u32(static_cast<uint32_t>(kind));
  h.u64(raw.size());
  h.u64(compressed);
  h.u32(crc32_of(raw));
  METILE_ASSERT(h.out.size() == kEntryHeaderSize);
  std::memcpy(out.data(), h.out.data(), kEntryHeaderSize);
  Sha256::Digest tag = hmac_sha256(mac.data(), mac.size(), out.data(), out.size());
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

std::optional<Bytes> decode_entry(std::span<const uint8_t> whole, const KeyDigest& key,
                                  PayloadKind kind, const MacKey& mac, uint32_t format_version) {
  if (whole.size() < kEntryHeaderSize + kEntryMacSize) return std::nullopt;
  std::span<const uint8_t> file = whole.first(whole.size() - kEntryMacSize);
  Sha256::Digest tag = hmac_sha256(mac.data(), mac.size(), file.data(), file.size());
  uint8_t diff = 0;  // constant time: the comparison must not tell a forger how close it came
  for (size_t i = 0; i < tag.size(); ++i) diff |= tag[i] ^ whole[file.size() + i];
  if (diff != 0) return std::nullopt;
  Reader r(file);
  auto magic = r.take(4);
  uint32_t version = r.u32();
  auto file_key = r.take(32);
  uint32_t file_kind = r.u32();
  uint64_t raw_size = r.u64();
  uint64_t compressed = r.u64();
  uint32_t crc = r.u32();
  if (r.bad || std::memcmp(magic.data(), kMagic, 4) != 0 || version != format_version ||
      std::memcmp(file_key.data(), key.data(), key.size()) != 0 ||
      file_kind != static_cast<uint32_t>(kind) || compressed != file.size() - kEntryHeaderSize ||
      raw_size > compressed * kMaxRatio)
    return std::nullopt;

  // One spare byte of room: a stream that inflates to more than the header says is caught by
  // the size check instead of stopping silently at the boundary (and an empty payload still has
  // somewhere to point).
  Bytes raw(raw_size + 1);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return std::nullopt;
  z.next_in = const_cast<Bytef*>(file.data() + kEntryHeaderSize);
  z.next_out = raw.data();
  size_t in_left = compressed, out_left = raw.size();
  int rc = Z_OK;
  while (rc == Z_OK) {
    uInt in_now = clamp_uint(in_left), out_now = clamp_uint(out_left);
    z.avail_in = in_now;
    z.avail_out = out_now;
    rc = inflate(&z, Z_NO_FLUSH);
    in_left -= in_now - z.avail_in;
    out_left -= out_now - z.avail_out;
    // No progress possible: the stream wants more input than the file has.
    if (rc == Z_OK && z.avail_in == in_now && z.avail_out == out_now) break;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END || in_left != 0 || out_left != 1) return std::nullopt;
  raw.pop_back();
  if (crc32_of(raw) != crc) return std::nullopt;
  return raw;
}

Bytes serialize_artifact(const CachedArtifact& a) {
  Writer w;
  w.str(artifact_kind_name(a.artifact.kind));
  w.str(a.artifact.entry);
  w.bytes(a.artifact.bytes.data(), a.artifact.bytes.size());
  w.u64(a.artifact.sources.size());
  for (const auto& [stage, text] : a.artifact.sources) {
    w.str(stage_name(stage));
    w.str(text);
  }
  w.u64(static_cast<uint64_t>(static_cast<int64_t>(a.artifact.threads_per_group)));
  w.u64(a.artifact.threadgroup_memory_bytes);
  w.f64(a.build_seconds);
  return std::move(w.out);
}

std::optional<CachedArtifact> deserialize_artifact(std::span<const uint8_t> raw) {
  Reader r(raw);
  CachedArtifact a;
  // Kinds and stages are stored by name; one this build does not know makes the entry unusable.
  std::optional<ArtifactKind> kind = parse_artifact_kind(r.str());
  if (!kind) return std::nullopt;
  a.artifact.kind = *kind;
  a.artifact.entry = r.str();
  auto bytes = r.bytes();
  a.artifact.bytes.assign(bytes.begin(), bytes.end());
  uint64_t n = r.u64();
  for (uint64_t i = 0; i < n && !r.bad; ++i) {
    std::optional<Stage> stage = parse_stage(r.str());
    if (!stage) return std::nullopt;
    a.artifact.sources[*stage] = r.str();
  }
  a.artifact.threads_per_group = static_cast<int>(static_cast<int64_t>(r.u64()));
  a.artifact.threadgroup_memory_bytes = r.u64();
  a.build_seconds = r.f64();
  if (r.bad || !r.at_end()) return std::nullopt;
  return a;
}

Bytes serialize_autotune(std::string_view key, std::string_view winner) {
  Writer w;
  w.str(key);
  w.str(winner);
  return std::move(w.out);
}

std::optional<std::string> deserialize_autotune(std::span<const uint8_t> raw,
                                                std::string_view key) {
  Reader r(raw);
  std::string stored_key = r.str();
  std::string winner = r.str();
  if (r.bad || !r.at_end() || stored_key != key) return std::nullopt;
  return winner;
}

std::optional<KeyDigest> parse_key_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  KeyDigest d;
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (char c : hex.substr(2 * i, 2)) {
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else return std::nullopt;
    }
    d[i] = static_cast<uint8_t>(v);
  }
  return d;
}

}  // namespace metile
