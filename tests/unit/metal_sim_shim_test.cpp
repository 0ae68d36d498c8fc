// metal-sim front half: the shim compiles every hand-written kernel, source preparation,
// signatures and their trampolines, and compile errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "cache/cache.h"
#include "cache_fake_device.h"
#include "metal_sim_test_util.h"
#include "runtime/metal_sim/msl_prepare.h"
#include "runtime/metal_sim/toolchain.h"
#include "runtime/metal_sim/trampoline.h"

namespace metile::metal_sim {
namespace METILE_UNITY_ID {

using testing::error_of;
using testing::read_metal;

TEST(MetalSimShim, EveryMetalFileCompilesWithWerror) {
  METAL_SIM_REQUIRE_CLANG();
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::metal_dir())) {
    if (entry.path().extension() != ".metal") continue;
    SCOPED_TRACE(entry.path().string());
    std::string name = entry.path().filename().string();
    auto [status, message] = error_of([&] { check_msl(read_metal(name), name); });
    EXPECT_EQ(status, METILE_OK) << message;
    ++files;
  }
  EXPECT_GE(files, 6);
}

TEST(MetalSimShim, ShimCoversTheMslSurface) {
  METAL_SIM_REQUIRE_CLANG();
  // Constructs of metile-spec §8.9 and the usual MSL library, all in one kernel.
  const char* msl = R"(#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;
constant float kScale = 0.5f;
struct Pair { float2 a; half b; };
static inline float helper(thread const float& x, threadgroup float* t) { return x + t[0]; }
kernel void surface(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                    device atomic_uint* counter [[buffer(2)]], constant uint& n [[buffer(3)]],
                    uint tid [[thread_position_in_grid]],
                    ushort lane [[thread_index_in_simdgroup]]) {
  threadgroup float t[32], u[4];
  threadgroup float* p = t;
  float4 a = float4(1.0f, 2.0f, 3.0f, 4.0f), b = float4(a.xy, a.zw) * 2.0f;
  float3 c = a.xyz + b.rgb + metal::float3(1.0f);
  int2 i2 = int2(3, -4);
  uint3 u3 = uint3(tid);
  half4 h = half4(a) * 0.5h;
  bfloat bf = bfloat(1.5f);
  float s = 1.0f;
  s = exp(a.x) + exp2(a.y) + log(a.z) + log2(a.w) + sqrt(c.x) + rsqrt(c.y) + abs(-c.z) +
            fabs(-1.0f) + tanh(s) + sin(s) + cos(s) + floor(s) + ceil(s) + fmax(s, 1.0f) +
            fmin(s, 1.0f) + max(s, 0.0f) + min(s, 0.0f) + clamp(s, 0.0f, 1.0f) + pow(s, 2.0f) +
            fma(s, s, s) + mix(0.0f, 1.0f, 0.5f) + precise::exp(1.0f) + fast::exp(1.0f) +
            as_type<float>(0x3f800000u) + float(bf * h.x) + kScale + INFINITY + (-INFINITY) +
            NAN + FLT_MAX + select(0.0f, 1.0f, s > 0.0f) + float(abs(i2.y)) + float(u3.z);
  float4 m = max(a, b) + min(a, b) + select(a, b, a < b) + select(a, b, true) + exp(a);
  bool4 mask = bool4(a < b);
  if (all(mask) || any(a > b) || isnan(s) || isinf(s) || all(isfinite(m))) { s += 1.0f; }
  t[lane] = simd_sum(s) + simd_max(s) + simd_min(s) + simd_shuffle_xor(s, 1) +
            simd_broadcast(s, 0) + simd_shuffle_down(s, 1) + simd_shuffle_up(s, 1) +
            simd_prefix_inclusive_sum(s) + simd_broadcast_first(s) + float(simd_and(tid));
  simdgroup_barrier(mem_flags::mem_none);
  threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
  *(threadgroup float4*)(u) = m;
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f), fa, fb;
  simdgroup_load(fa, p, 8);
  simdgroup_load(fb, t, 4, ulong2(0, 0), true);
  simdgroup_multiply_accumulate(acc, fa, fb, acc);
  simdgroup_half8x8 ha = simdgroup_half8x8(1.0h);
  simdgroup_multiply_accumulate(acc, ha, ha, acc);
  acc.thread_elements()[0] = max(acc.thread_elements()[0], 0.0f);
  simdgroup_store(acc, y, 8);
  uint old = atomic_fetch_add_explicit(counter, 1u, memory_order_relaxed);
  Pair pr = {float2(1.0f), 1.0h};
  if (tid < n) { y[tid] = helper(s, p) + u[0] + float(old) + pr.a.y + float(pr.b) + m.w + c.z; }
})";
  auto [status, message] = error_of([&] { check_msl(msl, "surface.metal"); });
  EXPECT_EQ(status, METILE_OK) << message;
}

TEST(MetalSimShim, MslThatRealMetalRejectsDoesNotCompile) {
  METAL_SIM_REQUIRE_CLANG();
  // MSL has no erf; the emitter must not rely on one.
  auto [status, message] = error_of([] {
    check_msl(
        "#include <metal_stdlib>\nusing namespace metal;\n"
        "kernel void k(device float* y [[buffer(0)]]) { y[0] = erf(y[0]); }\n",
        "erf.metal");
  });
  EXPECT_EQ(status, METILE_ERROR_COMPILE);
  EXPECT_NE(message.find("erf.metal:3:"), std::string::npos) << message;
}

TEST(MetalSimPrepare, ThreadgroupVariablesBecomeGroupStorage) {
  std::string out = prepare_msl(
      "kernel void k(threadgroup float* a [[threadgroup(0)]]) {\n"
      "  threadgroup float s[8][4];\n"
      "  threadgroup uint n, m[2];\n"
      "  threadgroup float* p = (threadgroup float*)(s);\n"
      "}\n",
      "k.metal", nullptr);
  EXPECT_NE(
      out.find("auto& s = ::metal::detail::threadgroup_variable<float[ 8 ] [ 4 ]>(0, \"s\");"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("auto& n = ::metal::detail::threadgroup_variable<uint>(1, \"n\"); "
                     "auto& m = ::metal::detail::threadgroup_variable<uint[ 2 ]>(2, \"m\");"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("threadgroup "), std::string::npos) << out;
  EXPECT_EQ(out.find("[["), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 5) << "line numbers must not move";
}

TEST(MetalSimPrepare, CommentsStringsAndDirectivesAreLeftAlone) {
  std::string src =
      "#define TG threadgroup\n"
      "// threadgroup float x[4];\n"
      "/* [[buffer(0)]] */ const char* s = \"threadgroup\";\n";
  EXPECT_EQ(prepare_msl(src, "k.metal", nullptr), src);
}

TEST(MetalSimPrepare, RejectsWhatMetalSimCannotRun) {
  auto expect = [](const std::string& src, const std::string& what) {
    auto [status, message] = error_of([&] { prepare_msl(src, "k.metal", nullptr); });
    EXPECT_EQ(status, METILE_ERROR_COMPILE) << src;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  expect("kernel void k() {\n threadgroup float x[4] = {0};\n}",
         "k.metal:2: threadgroup variable 'x' cannot have an initializer");
  expect("threadgroup float g[4];\n", "threadgroup variable 'g' at program scope");
  expect("kernel void k() { threadgroup float a[4], *p; }", "separately");
  expect("kernel void k(uint x [[position_in_grid]]) {}", "unknown attribute [[position_in_grid]]");
  expect("kernel void k(uint x [[buffer(0), maybe_unused]]) {}", "cannot mix");
}

TEST(MetalSimPrepare, ChecksTheKernelAgainstItsSignature) {
  const std::string src =
      "kernel void k(device const float* x [[buffer(0)]], constant int& n [[buffer(1)]],\n"
      "              uint tid [[thread_position_in_grid]]) {}\n";
  MslSignature good{"k",
                    {MslArg::buffer("x", 0, DType::f32, true), MslArg::scalar("n", 1, DType::i32),
                     MslArg::builtin_arg("tid", MslBuiltin::thread_position_in_grid)}};
  EXPECT_NO_THROW(prepare_msl(src, "k.metal", &good));

  auto expect = [&](MslSignature sig, const std::string& what) {
    auto [status, message] = error_of([&] { prepare_msl(src, "k.metal", &sig); });
    EXPECT_EQ(status, METILE_ERROR_COMPILE);
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  MslSignature s = good;
  s.kernel = "other";
  expect(s, "no kernel function `void other(...)`");
  s = good;
  s.args.pop_back();
  expect(s, "has 3 parameters but its signature lists 2");
  s = good;
  s.args[1].binding = 2;
  expect(s, "parameter 1 'n' has [[buffer(1)]] but the signature expects [[buffer(2)]]");
  s = good;
  s.args[2].builtin = MslBuiltin::thread_index_in_threadgroup;
  expect(s, "expects [[thread_index_in_threadgroup]]");
  s = good;
  s.args[0].is_const = false;
  expect(s, "should be a non-const pointer");
  s = good;
  s.args[0].name = "y";
  expect(s, "parameter 0 'x' is named 'y' in the signature");
}

TEST(MetalSimPrepare, PackedMembersAreNotKernelParameters) {
  const std::string src =
      "struct S { int n; };\n"
      "kernel void k(device float* x [[buffer(0)]], constant S& s [[buffer(1)]]) {}\n";
  MslSignature sig{"k",
                   {MslArg::buffer("x", 0, DType::f32, false), MslArg::member("n", DType::i32),
                    MslArg::packed("s", 1, "S")}};
  EXPECT_NO_THROW(prepare_msl(src, "k.metal", &sig));
  sig.args.back().binding = 2;
  auto [status, message] = error_of([&] { prepare_msl(src, "k.metal", &sig); });
  EXPECT_EQ(status, METILE_ERROR_COMPILE);
  EXPECT_NE(message.find("parameter 1 's' has [[buffer(1)]] but the signature expects [[buffer(2)]]"),
            std::string::npos)
      << message;
}

MslSignature sample_signature() {
  return {"k",
          {MslArg::buffer("x", 0, DType::f16, true), MslArg::buffer("y", 1, DType::bf16, false),
           MslArg::atomic_buffer("c", 2, DType::u32), MslArg::scalar("n", 3, DType::i64),
           MslArg::threadgroup("t", 0, DType::f32, 256),
           MslArg::builtin_arg("lid", MslBuiltin::simdgroup_index_in_threadgroup)}};
}

TEST(MetalSimSignature, PrintsAndParsesBack) {
  MslSignature s = sample_signature();
  std::string text = print_signature(s);
  EXPECT_EQ(text,
            "kernel k\nbuffer x 0 f16 const\nbuffer y 1 bf16\natomic c 2 u32\nscalar n 3 i64\n"
            "threadgroup t 0 f32 256\nbuiltin lid simdgroup_index_in_threadgroup\n");
  EXPECT_EQ(parse_signature(text), s);
  EXPECT_EQ(s.launch_arg_count(), 4u);
  EXPECT_EQ(s.threadgroup_arg_bytes(), 1024u);
}

TEST(MetalSimSignature, RejectsMalformedSignatures) {
  auto expect = [](const std::function<void()>& f, const std::string& what) {
    auto [status, message] = error_of(f);
    EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  expect([] { parse_signature(""); }, "empty signature");
  expect([] { parse_signature("kernel k\nbuffer x zero f32\n"); }, "binding is not a number");
  expect([] { parse_signature("kernel k\nbuffer x 0 f33\n"); }, "unknown element type 'f33'");
  expect([] { parse_signature("kernel k\nbuiltin tid thread_id\n"); }, "builtin NAME ATTRIBUTE");
  expect([] { parse_signature("kern k\n"); }, "expected `kernel NAME`");
  MslSignature s = sample_signature();
  s.args[1].binding = 0;
  expect([&] { validate(s); }, "[[buffer(0)]] is already taken");
  s = sample_signature();
  s.args[1].name = "x";
  expect([&] { validate(s); }, "two arguments are named 'x'");
  s = sample_signature();
  s.args[0].binding = 31;
  expect([&] { validate(s); }, "binding 31 is outside 0..30");
  s = sample_signature();
  s.args[2].dtype = DType::f16;
  expect([&] { validate(s); }, "atomics are device buffers of i32, u32 or f32");
  s = sample_signature();
  s.args[4].count = 0;
  expect([&] { validate(s); }, "threadgroup argument 't' has 0 elements");
  s = sample_signature();
  s.kernel = "2k";
  expect([&] { validate(s); }, "kernel name '2k' is not an identifier");
}

// Scalars packed into one struct: the members sit among the launch arguments, the struct is
// the kernel parameter; each member at its C offset (aligned to its size).
MslSignature packed_signature() {
  return {"k",
          {MslArg::member("flag", DType::boolean), MslArg::buffer("x", 0, DType::f32, true),
           MslArg::member("n", DType::i64), MslArg::member("h", DType::f16),
           MslArg::member("m", DType::i32), MslArg::packed("mt_s", 1, "mt_scalars")}};
}

TEST(MetalSimSignature, PackedScalarsPrintParseAndLayOut) {
  MslSignature s = packed_signature();
  std::string text = print_signature(s);
  EXPECT_EQ(text, "kernel k\nmember flag bool\nbuffer x 0 f32 const\nmember n i64\nmember h f16\n"
                  "member m i32\npacked mt_s 1 mt_scalars\n");
  EXPECT_EQ(parse_signature(text), s);
  EXPECT_EQ(s.launch_arg_count(), 5u);
  uint64_t bytes = 0;
  EXPECT_EQ(s.packed_layout(&bytes), (std::vector<uint64_t>{0, 0, 8, 16, 20, 0}));
  EXPECT_EQ(bytes, 24u);
  std::string t = make_trampoline(s);
  EXPECT_NE(t.find("static_cast<const float*>(a[1]),\n      *static_cast<const mt_scalars*>(a[5]));"),
            std::string::npos)
      << t;
}

TEST(MetalSimSignature, RejectsMalformedPackedScalars) {
  auto expect = [](const std::function<void()>& f, const std::string& what) {
    auto [status, message] = error_of(f);
    EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  expect([] { parse_signature("kernel k\nmember n i32 4\n"); }, "expected `member NAME TYPE`");
  expect([] { parse_signature("kernel k\npacked s 0\n"); }, "too few fields");
  expect([] { parse_signature("kernel k\nmember n i32\n"); }, "members without a packed argument");
  expect([] { parse_signature("kernel k\npacked s 0 S\n"); }, "a packed argument without members");
  MslSignature s = packed_signature();
  s.args.push_back(MslArg::packed("s2", 2, "other"));
  expect([&] { validate(s); }, "more than one packed argument");
  s = packed_signature();
  s.args.back().struct_name = "x";
  expect([&] { validate(s); }, "struct name 'x' is not a fresh identifier");
  s = packed_signature();
  s.args.back().binding = 0;
  expect([&] { validate(s); }, "[[buffer(0)]] is already taken");
  s = packed_signature();
  for (int i = 0; i < 600; ++i) s.args.push_back(MslArg::member("v" + std::to_string(i), DType::i64));
  expect([&] { validate(s); }, "its scalars take 4824 bytes, over Metal's limit of 4096");
}

TEST(MetalSimSignature, TrampolineCastsEveryArgument) {
  std::string t = make_trampoline(sample_signature());
  for (const char* piece :
       {"static_cast<const ::metal::half*>(a[0])", "static_cast<::metal::bfloat*>(a[1])",
        "static_cast<::metal::atomic<::metal::uint>*>(a[2])", "*static_cast<const long*>(a[3])",
        "static_cast<float*>(a[4])",
        "::metal::detail::builtin(t, 8 /* simdgroup_index_in_threadgroup */)",
        "void metal_sim_entry(", "metal_sim_abi_version"})
    EXPECT_NE(t.find(piece), std::string::npos) << piece << "\n" << t;
}

TEST(MetalSimCompile, MslErrorsComeBackWithClangsLog) {
  METAL_SIM_REQUIRE_CLANG();
  MslSignature sig{"bad", {MslArg::buffer("y", 0, DType::f32, false)}};
  auto [status, message] = error_of([&] {
    build_msl(
        "#include <metal_stdlib>\nusing namespace metal;\n\n"
        "kernel void bad(device float* y [[buffer(0)]]) {\n"
        "  y[0] = undeclared_value * 2.0f;\n}\n",
        sig);
  });
  EXPECT_EQ(status, METILE_ERROR_COMPILE);
  EXPECT_NE(message.find("[metal-sim] bad: clang failed to compile the MSL"), std::string::npos)
      << message;
  EXPECT_NE(message.find("bad.metal:5:10: error: use of undeclared identifier 'undeclared_value'"),
            std::string::npos)
      << message;
}

// The same translation unit is built once: the second build_msl reads the shared object and
// its stack size from the compile cache's directory; an entry that does not verify is rebuilt;
// with the disk cache off nothing is kept.
TEST(MetalSimCompile, SameMslIsBuiltOnceThroughTheCompileCache) {
  METAL_SIM_REQUIRE_CLANG();
  test::TempDir dir;
  Cache& cache = global_cache();
  cache.set_dir(dir.path());
  cache.set_enabled(true);
  struct Restore {
    ~Restore() {
      global_cache().set_dir(std::nullopt);
      global_cache().set_enabled(true);
    }
  } restore;
  MslSignature sig{"twice", {MslArg::buffer("y", 0, DType::f32, false)}};
  const char* msl = "kernel void twice(device float* y [[buffer(0)]]) { y[0] *= 2.0f; }\n";
  auto entries = [&] {
    std::vector<std::string> found;
    for (const auto& f : test::all_files(dir.path()))
      if (f.size() > 4 && f.substr(f.size() - 4) == ".mtc") found.push_back(f);
    return found;
  };

  uint64_t runs = clang_runs(), first_stack = 0, stack = 0;
  std::vector<uint8_t> first = build_msl(msl, sig, &first_stack);
  EXPECT_EQ(clang_runs(), runs + 1);
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_EQ(build_msl(msl, sig, &stack), first);
  EXPECT_EQ(stack, first_stack);
  EXPECT_EQ(clang_runs(), runs + 1) << "the second build ran clang";

  // Another kernel name is another translation unit.
  MslSignature other{"thrice", {MslArg::buffer("y", 0, DType::f32, false)}};
  build_msl("kernel void thrice(device float* y [[buffer(0)]]) { y[0] *= 3.0f; }\n", other);
  EXPECT_EQ(clang_runs(), runs + 2);
  EXPECT_EQ(entries().size(), 2u);

  // A flipped byte fails the entry's HMAC: rebuilt, and the entry published again.
  for (const std::string& f : entries()) {
    std::fstream io(dir.path() + "/" + f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(80);
    io.put('\x5a');
  }
  EXPECT_EQ(build_msl(msl, sig, &stack), first);
  EXPECT_EQ(clang_runs(), runs + 3);
  EXPECT_EQ(build_msl(msl, sig), first);
  EXPECT_EQ(clang_runs(), runs + 3);

  cache.clear();
  cache.set_enabled(false);
  build_msl(msl, sig);
  build_msl(msl, sig);
  EXPECT_EQ(clang_runs(), runs + 5);
  EXPECT_TRUE(entries().empty());
}

TEST(MetalSimCompile, ParameterTypesMustMatchTheSignature) {
  METAL_SIM_REQUIRE_CLANG();
  // The attributes agree but the element type does not: the typed trampoline call fails.
  MslSignature sig{"k", {MslArg::buffer("y", 0, DType::i32, false)}};
  auto [status, message] = error_of(
      [&] { build_msl("kernel void k(device float* y [[buffer(0)]]) { y[0] = 1.0f; }\n", sig); });
  EXPECT_EQ(status, METILE_ERROR_COMPILE);
  EXPECT_NE(message.find("metal_sim_trampoline"), std::string::npos) << message;
}

TEST(MetalSimCompile, ThreadgroupArgumentsOverTheLimitAreRejected) {
  MslSignature sig{"k",
                   {MslArg::threadgroup("t", 0, DType::f32, 4096),
                    MslArg::threadgroup("u", 1, DType::f32, 4097)}};
  auto [status, message] = error_of([&] {
    build_msl(
        "kernel void k(threadgroup float* t [[threadgroup(0)]], threadgroup float* u "
        "[[threadgroup(1)]]) {}",
        sig);
  });
  EXPECT_EQ(status, METILE_ERROR_COMPILE);
  EXPECT_NE(message.find("need 32772 bytes, over Apple's 32768-byte threadgroup memory limit"),
            std::string::npos)
      << message;
}

TEST(MetalSimToolchain, RejectsClangsThatCannotCompileTheShim) {
  ClangProbe missing = probe_clang_command("metile-no-such-clang");
  EXPECT_NE(missing.unavailable.find("cannot run metile-no-such-clang"), std::string::npos)
      << missing.unavailable;
  ClangProbe not_clang = probe_clang_command("true");
  EXPECT_NE(not_clang.unavailable.find("is not clang"), std::string::npos) << not_clang.unavailable;
  if (std::system("command -v clang++-14 > /dev/null 2>&1") == 0) {
    ClangProbe old = probe_clang_command("clang++-14");
    EXPECT_NE(old.unavailable.find("is clang 14; metal-sim needs clang >= 15"), std::string::npos)
        << old.unavailable;
  }
}

}  // namespace
}  // namespace metile::metal_sim
