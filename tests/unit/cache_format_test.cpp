// sha256 against the FIPS 180-2 vectors, crc32, and the entry container and payload encodings.
#include <gtest/gtest.h>

#include <cstring>

#include "cache/entry.h"
#include "support/sha256.h"

namespace metile {
namespace METILE_UNITY_ID {

TEST(CacheSha256, Fips180_2Vectors) {
  // FIPS 180-2, Appendix B.1 (one block), B.2 (two blocks), B.3 (one million 'a').
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(CacheSha256, PaddingBoundaries) {
  // 55, 56 and 64 bytes straddle the length field's block boundary.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(CacheSha256, IncrementalMatchesOneShot) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += static_cast<char>('a' + i * 7 % 26);
  std::string whole = sha256_hex(msg);
  for (size_t split : {0, 1, 63, 64, 65, 128, 200, 300}) {
    Sha256 h;
    h.update(std::string_view(msg).substr(0, split));
    h.update(std::string_view(msg).substr(split));
    EXPECT_EQ(to_hex(h.finish()), whole) << "split at " << split;
  }
  Sha256 bytewise;
  for (char c : msg) bytewise.update(&c, 1);
  EXPECT_EQ(to_hex(bytewise.finish()), whole);
}

TEST(CacheCrc32, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(crc32_of({reinterpret_cast<const uint8_t*>(s), std::strlen(s)}), 0xCBF43926u);
  EXPECT_EQ(crc32_of({}), 0u);
}

KeyDigest digest_of(std::string_view s) {
  Sha256 h;
  h.update(s);
  return h.finish();
}

const MacKey kMac = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                     17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

Bytes sample_payload(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 31) ^ (i >> 7));
  return b;
}

TEST(CacheEntry, RoundTripsAndCompresses) {
  KeyDigest key = digest_of("k");
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
    Bytes raw = sample_payload(n);
    Bytes file = encode_entry(key, PayloadKind::artifact, raw, kMac);
    ASSERT_EQ(std::memcmp(file.data(), "MTLC", 4), 0);
    auto back = decode_entry(file, key, PayloadKind::artifact, kMac);
    ASSERT_TRUE(back) << n;
    EXPECT_EQ(*back, raw);
    if (n == 300000) {
      EXPECT_LT(file.size(), n / 2) << "this payload is very compressible";
    }
  }
}

TEST(CacheEntry, RejectsEveryMismatch) {
  KeyDigest key = digest_of("k");
  Bytes raw = sample_payload(5000);
  Bytes file = encode_entry(key, PayloadKind::artifact, raw, kMac);
  EXPECT_FALSE(decode_entry(file, digest_of("other"), PayloadKind::artifact, kMac)) << "wrong key";
  EXPECT_FALSE(decode_entry(file, key, PayloadKind::autotune, kMac)) << "wrong kind";
  EXPECT_FALSE(decode_entry(file, key, PayloadKind::artifact, kMac, kCacheFormatVersion + 1))
      << "wrong version";
  Bytes v2 = encode_entry(key, PayloadKind::artifact, raw, kMac, kCacheFormatVersion + 1);
  EXPECT_FALSE(decode_entry(v2, key, PayloadKind::artifact, kMac)) << "entry from another version";
  EXPECT_TRUE(decode_entry(v2, key, PayloadKind::artifact, kMac, kCacheFormatVersion + 1));
}

// An entry written without the directory's secret (right key, right crc) is not accepted.
TEST(CacheEntry, EntryWithAnotherSecretIsRejected) {
  KeyDigest key = digest_of("k");
  Bytes raw = sample_payload(500);
  MacKey other = kMac;
  other[0] ^= 1;
  Bytes forged = encode_entry(key, PayloadKind::artifact, raw, other);
  EXPECT_FALSE(decode_entry(forged, key, PayloadKind::artifact, kMac));
  forged.resize(forged.size() - kEntryMacSize);  // no HMAC at all
  EXPECT_FALSE(decode_entry(forged, key, PayloadKind::artifact, kMac));
  EXPECT_TRUE(decode_entry(encode_entry(key, PayloadKind::artifact, raw, kMac), key,
                           PayloadKind::artifact, kMac));
}

TEST(CacheEntry, HmacMatchesRfc4231) {
  // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
  std::string k = "Jefe", d = "what do ya want for nothing?";
  auto tag = hmac_sha256(reinterpret_cast<const uint8_t*>(k.data()), k.size(),
                         reinterpret_cast<const uint8_t*>(d.data()), d.size());
  EXPECT_EQ(to_hex(tag), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CacheEntry, EveryTruncationAndEveryByteFlipIsRejected) {
  KeyDigest key = digest_of("k");
  Bytes raw = sample_payload(700);
  Bytes file = encode_entry(key, PayloadKind::artifact, raw, kMac);
  for (size_t len = 0; len < file.size(); ++len) {
    std::span<const uint8_t> cut(file.data(), len);
    EXPECT_FALSE(decode_entry(cut, key, PayloadKind::artifact, kMac)) << "truncated to " << len;
  }
  Bytes longer = file;
  longer.push_back(0);
  EXPECT_FALSE(decode_entry(longer, key, PayloadKind::artifact, kMac)) << "trailing garbage";
  // A flipped bit is either rejected or (for the few bits deflate ignores) harmless.
  int rejected = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    for (uint8_t bit = 1; bit != 0; bit <<= 1) {
      Bytes bad = file;
      bad[i] ^= bit;
      auto back = decode_entry(bad, key, PayloadKind::artifact, kMac);
      if (back) {
        EXPECT_EQ(*back, raw) << "flipped bit " << int{bit} << " of byte " << i;
      }
      rejected += !back;
    }
  }
  EXPECT_GT(rejected, static_cast<int>(file.size() * 8 * 9 / 10));
}

TEST(CacheEntry, HugeClaimedSizeIsRejectedWithoutAllocating) {
  KeyDigest key = digest_of("k");
  Bytes file = encode_entry(key, PayloadKind::artifact, sample_payload(100), kMac);
  for (int i = 0; i < 8; ++i) file[44 + i] = 0xff;  // raw size field
  EXPECT_FALSE(decode_entry(file, key, PayloadKind::artifact, kMac));
}

// Format version 3 stores the artifact kind and stage names as strings (the names of
// kArtifactKindNames and kStageNames); entries written before they became enums stay readable.
// The payload is spelled out byte by byte here, the way those builds wrote it.
std::vector<uint8_t> v3_payload(std::string_view kind, std::string_view stage) {
  std::vector<uint8_t> out;
  auto u64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto str = [&](std::string_view s) {
    u64(s.size());
    out.insert(out.end(), s.begin(), s.end());
  };
  str(kind);
  str("");           // entry
  str("\x7f" "ELF");  // bytes
  u64(1);            // one source
  str(stage);
  str("// text");
  u64(64);           // threads_per_group
  u64(0);            // threadgroup_memory_bytes
  u64(0);            // build_seconds: 0.0
  return out;
}

TEST(CacheEntry, Version3PayloadsWithNamedKindsAndStagesDecode) {
  EXPECT_EQ(kCacheFormatVersion, 3u) << "a new version needs its own compatibility test";
  struct Case {
    const char* kind;
    ArtifactKind want;
  };
  for (Case c : {Case{"so", ArtifactKind::shared_object}, Case{"cubin", ArtifactKind::cubin},
                 Case{"metallib", ArtifactKind::metallib}, Case{"msl", ArtifactKind::msl},
                 Case{"none", ArtifactKind::none}}) {
    auto a = deserialize_artifact(v3_payload(c.kind, "cpp"));
    ASSERT_TRUE(a) << c.kind;
    EXPECT_EQ(a->artifact.kind, c.want) << c.kind;
    EXPECT_EQ(a->artifact.bytes, (std::vector<uint8_t>{0x7f, 'E', 'L', 'F'}));
    EXPECT_EQ(a->artifact.sources.at(Stage::cpp), "// text");
    EXPECT_EQ(a->artifact.threads_per_group, 64);
    EXPECT_EQ(serialize_artifact(*a), v3_payload(c.kind, "cpp")) << "written back unchanged";
  }
  for (const Named<Stage>& s : kStageNames) {
    auto a = deserialize_artifact(v3_payload("so", s.name));
    ASSERT_TRUE(a) << s.name;
    EXPECT_TRUE(a->artifact.sources.count(s.value)) << s.name;
  }
  // A kind or stage this build does not know makes the entry unusable (a miss), not an error.
  EXPECT_FALSE(deserialize_artifact(v3_payload("fake", "cpp")));
  EXPECT_FALSE(deserialize_artifact(v3_payload("so", "fake_src")));
  EXPECT_FALSE(deserialize_artifact(v3_payload("", "cpp")));
}

TEST(CacheEntry, ArtifactRoundTrip) {
  CachedArtifact a;
  a.artifact.kind = ArtifactKind::shared_object;
  a.artifact.bytes = sample_payload(333);
  a.artifact.sources[Stage::cpp] = "int main() {}";
  a.artifact.sources[Stage::gpu_ir] = "";
  a.artifact.threads_per_group = 256;
  a.artifact.threadgroup_memory_bytes = 32768;
  a.build_seconds = 0.125;
  Bytes raw = serialize_artifact(a);
  auto back = deserialize_artifact(raw);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->artifact.kind, ArtifactKind::shared_object);
  EXPECT_EQ(back->artifact.bytes, a.artifact.bytes);
  EXPECT_EQ(back->artifact.sources, a.artifact.sources);
  EXPECT_EQ(back->artifact.threads_per_group, 256);
  EXPECT_EQ(back->artifact.threadgroup_memory_bytes, 32768u);
  EXPECT_EQ(back->build_seconds, 0.125);
  for (size_t len = 0; len < raw.size(); ++len)
    EXPECT_FALSE(deserialize_artifact({raw.data(), len})) << "truncated to " << len;
  raw.push_back(1);
  EXPECT_FALSE(deserialize_artifact(raw)) << "trailing bytes";
}

TEST(CacheEntry, AutotuneRecordChecksItsKey) {
  Bytes raw = serialize_autotune("gemm/1024", "BM=64,BN=64");
  EXPECT_EQ(deserialize_autotune(raw, "gemm/1024"), "BM=64,BN=64");
  EXPECT_FALSE(deserialize_autotune(raw, "gemm/2048"));
}

TEST(CacheEntry, ParsesKeyHex) {
  std::string hex = sha256_hex("x");
  auto d = parse_key_hex(hex);
  ASSERT_TRUE(d);
  EXPECT_EQ(to_hex(*d), hex);
  EXPECT_FALSE(parse_key_hex(hex.substr(1)));
  EXPECT_FALSE(parse_key_hex(std::string(64, 'G')));
  EXPECT_FALSE(parse_key_hex(std::string(64, 'A'))) << "keys are lowercase";
}

}  // namespace
}  // namespace metile
