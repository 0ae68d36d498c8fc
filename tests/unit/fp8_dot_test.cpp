// FP8 dots (docs/semantics.md, "FP8 dots"): the verifier's rules (FP8 on both sides, f32
// accumulator; the other pairs refused naming the operand, its dtype and shape), the fp8_dots
// Tile IR pass's text, interp's own FP8 dot (the pass switched off) giving the bits the pass's
// f16 dot gives, and cuda's own FP8 dots (the FP8 wgmma atom, else f16 staging in lowering).
// Every device against a float64 reference: bindings/python/tests/test_fp8_dot.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "passes/tile/tile_pass.h"
#include "passes/tile/tile_pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"
#include "support/float8.h"
#include "target/options.h"

namespace metile {
namespace METILE_UNITY_ID {

// C = A @ B for a 16x32 A and a 32x16 B of the given dtypes, accumulating in `acc`.
std::string fp8_kernel(const std::string& a, const std::string& b, const std::string& acc = "f32") {
  return "kernel @fp8dot(%A: ptr<" + a + ">, %B: ptr<" + b + ">, %C: ptr<" + acc + ">) {\n"
         "  %0 = const {value = 0} : i32\n"
         "  %1 = const {value = 32} : i32\n"
         "  %2 = const {value = 16} : i32\n"
         "  %3 = tile_load %A, %0, %0, %1 : tile<16x32x" + a + ">\n"
         "  %4 = tile_load %B, %0, %0, %2 : tile<32x16x" + b + ">\n"
         "  %5 = const {value = 0.0} : " + acc + "\n"
         "  %6 = broadcast %5 : tile<16x16x" + acc + ">\n"
         "  %7 = dot %3, %4, %6 : tile<16x16x" + acc + "> loc(\"f8.py\":9)\n"
         "  tile_store %C, %0, %0, %2, %7\n"
         "}\n";
}

std::string refusal(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    return e.what();
  }
  ADD_FAILURE() << "verified:\n" << text;
  return "";
}

TEST(Fp8Dot, BothFormatsAndTheirMixVerifyWithAnF32Accumulator) {
  for (const char* a : {"f8e4m3", "f8e5m2"})
    for (const char* b : {"f8e4m3", "f8e5m2"}) EXPECT_NO_THROW(parse(fp8_kernel(a, b))) << a << b;
}

TEST(Fp8Dot, OtherPairsAreRefusedNamingTheOperand) {
  EXPECT_EQ(refusal(fp8_kernel("f8e4m3", "f16")),
            "[verify] f8.py:9: dot: operand b is tile<32x16xf16> but operand a is "
            "tile<16x32xf8e4m3>: an FP8 dot takes f8e4m3 or f8e5m2 on both sides (cast b to "
            "FP8, or both to f16)");
  EXPECT_NE(refusal(fp8_kernel("bf16", "f8e5m2")).find(
                "dot: operand a is tile<16x32xbf16> but operand b is tile<32x16xf8e5m2>"),
            std::string::npos);
  EXPECT_NE(refusal(fp8_kernel("f8e4m3", "f8e4m3", "f16")).find(
                "dot: accumulator tile<16x16xf16> does not fit FP8 inputs (f8e4m3 x f8e4m3): "
                "FP8 dots accumulate in f32"),
            std::string::npos);
  EXPECT_NE(refusal(fp8_kernel("f16", "f16", "f8e4m3")).find("dot: does not take f8e4m3 operands"),
            std::string::npos);
}

TEST(Fp8Dot, ThePassCastsFp8OperandsToF16InFrontOfTheDot) {
  Program p = parse(fp8_kernel("f8e4m3", "f8e5m2"));
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("fp8_dots", p, ctx);
  const std::string want =
      "kernel @fp8dot(%A: ptr<f8e4m3>, %B: ptr<f8e5m2>, %C: ptr<f32>) {\n"
      "  %0 = const {value = 0} : i32\n"
      "  %1 = const {value = 32} : i32\n"
      "  %2 = const {value = 16} : i32\n"
      "  %3 = tile_load %A, %0, %0, %1 : tile<16x32xf8e4m3>\n"
      "  %4 = tile_load %B, %0, %0, %2 : tile<32x16xf8e5m2>\n"
      "  %5 = const {value = 0.0} : f32\n"
      "  %6 = broadcast %5 : tile<16x16xf32>\n"
      "  %7 = cast %3 : tile<16x32xf16>\n"
      "  %8 = cast %4 : tile<32x16xf16>\n"
      "  %9 = dot %7, %8, %6 : tile<16x16xf32>\n"
      "  tile_store %C, %0, %0, %2, %9\n"
      "}\n";
  EXPECT_EQ(print(p, false), want);
  // Dots on other dtypes are left alone.
  Program f16 = parse(fp8_kernel("f16", "f16"));
  const std::string before = print(f16, false);
  run_tile_pass("fp8_dots", f16, ctx);
  EXPECT_EQ(print(f16, false), before);
}

// interp with and without the pass: its own FP8 dot (exact products summed in f32 in k order)
// is the f16 dot the pass makes, bit for bit, on codes covering subnormals and both signs.
std::vector<float> run_interp(const std::string& a_fmt, const std::string& b_fmt, bool pass) {
  auto dev = open_device("interp");
  CompileOptions o;
  o.no_cache = true;
  if (!pass) o.disabled_passes = {"fp8_dots"};
  auto ck = compile_kernel(dev, std::make_shared<Program>(parse(fp8_kernel(a_fmt, b_fmt))), o);
  std::vector<uint8_t> a(16 * 32), b(32 * 16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>((i * 53 + 5) % 256);
  // No NaN codes (E4M3 S.1111.111, E5M2 S.11111.xx): the comparison is of numbers.
  for (uint8_t& x : a) if ((a_fmt == "f8e4m3" ? (x & 0x7f) == 0x7f : (x & 0x7c) == 0x7c)) x = 0x01;
  for (uint8_t& x : b) if ((b_fmt == "f8e4m3" ? (x & 0x7f) == 0x7f : (x & 0x7c) == 0x7c)) x = 0x81;
  std::vector<float> c(16 * 16, -1.0f);
  auto ba = dev->wrap(a.data(), a.size()), bb = dev->wrap(b.data(), b.size());
  auto bc = dev->wrap(c.data(), c.size() * sizeof(float));
  LaunchArg xa, xb, xc;
  xa.buffer = ba.get();
  xb.buffer = bb.get();
  xc.buffer = bc.get();
  ck->kernel->launch(Grid{}, {xa, xb, xc});
  return c;
}

TEST(Fp8Dot, InterpsOwnFp8DotIsThePasssF16Dot) {
  for (const char* a : {"f8e4m3", "f8e5m2"})
    for (const char* b : {"f8e4m3", "f8e5m2"}) {
      const std::vector<float> own = run_interp(a, b, false), widened = run_interp(a, b, true);
      for (size_t i = 0; i < own.size(); ++i)
        ASSERT_EQ(__builtin_bit_cast(uint32_t, own[i]), __builtin_bit_cast(uint32_t, widened[i]))
            << a << " x " << b << " element " << i << ": " << own[i] << " vs " << widened[i];
    }
}

TEST(Fp8Dot, OtherDevicesNeedThePass) {
  CompileOptions o;
  o.no_cache = true;
  o.disabled_passes = {"fp8_dots"};
  try {
    compile_kernel(open_device("cpu"), std::make_shared<Program>(parse(fp8_kernel("f8e4m3", "f8e4m3"))), o);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "f8.py:9: a dot on FP8 operands needs the \"fp8_dots\" pass on this device"),
              std::string::npos)
        << e.what();
  }
}

// C = A @ B^T for a 64x64 A and a 64x64 B given N x K: both operands K-major, wgmma's FP8 form.
std::string fp8_nt_kernel(const std::string& a, const std::string& b) {
  return "kernel @fp8nt(%A: ptr<" + a + ">, %B: ptr<" + b + ">, %C: ptr<f32>) {\n"
         "  %0 = const {value = 0} : i32\n"
         "  %1 = const {value = 64} : i32\n"
         "  %2 = tile_load %A, %0, %0, %1 : tile<64x64x" + a + ">\n"
         "  %3 = tile_load %B, %0, %0, %1 : tile<64x64x" + b + ">\n"
         "  %4 = trans %3 : tile<64x64x" + b + ">\n"
         "  %5 = const {value = 0.0} : f32\n"
         "  %6 = broadcast %5 : tile<64x64xf32>\n"
         "  %7 = dot %2, %4, %6 : tile<64x64xf32> loc(\"f8.py\":9)\n"
         "  tile_store %C, %0, %0, %1, %7\n"
         "}\n";
}

// cuda's GPU lowering takes FP8 dots itself (DeviceInfo::lowers_fp8_dots): the pass leaves them,
// and turning it off is no error there.
TEST(Fp8Dot, ThePassLeavesDotsToALoweringThatTakesThem) {
  CompileOptions o;
  const Program p = parse(fp8_kernel("f8e4m3", "f8e5m2"));
  const std::string widened = ": tile<16x32xf16>";  // A's cast
  EXPECT_EQ(print(*run_tile_pipeline(p, o, false, false, true).program).find(widened), std::string::npos);
  EXPECT_NE(print(*run_tile_pipeline(p, o, false, false, false).program).find(widened), std::string::npos);
  o.disabled_passes = {"fp8_dots"};
  EXPECT_NO_THROW(run_tile_pipeline(p, o, false, false, true));
}

// Where the FP8 wgmma form does not fit (here: B as loaded, K x N; 16 rows), cuda's lowering
// stages the operands' exact f16 values for the f16 matrix instruction with f32 accumulation,
// sm_90 included (NVRTC, no GPU needed).
TEST(Fp8Dot, CudaCompilesOtherDotsOnTheF16MatrixUnit) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  CompileOptions o;
  for (bool in_lowering : {false, true}) {  // the pass's casts, or lowering's own
    auto lowered = run_tile_pipeline(parse(fp8_kernel("f8e4m3", "f8e5m2")), o, false, false, in_lowering).program;
    Artifact a = cuda_build_program(*lowered, o, "sm_90");
    const std::string& src = a.sources.at(Stage::cuda);
    EXPECT_NE(src.find("mt_mma_f16(&acc"), std::string::npos) << src;  // mma.sync m16n8k16 f16.f16
    EXPECT_EQ(src.find("e4m3.e5m2"), std::string::npos) << src;
  }
}

// Both operands K-major on sm_90: the FP8 wgmma atom, each operand in its own format, with the
// two-level accumulation unless fp8_promote is off (dot_choices.cpp).
TEST(Fp8Dot, CudaCompilesKMajorDotsOnTheFp8WarpgroupAtom) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  CompileOptions o;
  o.num_threads = 128;
  for (const char* a : {"f8e4m3", "f8e5m2"})
    for (const char* b : {"f8e4m3", "f8e5m2"}) {
      auto lowered = run_tile_pipeline(parse(fp8_nt_kernel(a, b)), o, false, false, true).program;
      Artifact art = cuda_build_program(*lowered, o, "sm_90");
      const std::string& src = art.sources.at(Stage::cuda);
      const std::string instr = std::string("m64n64k32.f32.") + (a + 2) + "." + (b + 2);
      EXPECT_NE(src.find(instr), std::string::npos) << instr << "\n" << src;
      EXPECT_NE(src.find("+= mma_p[mma_r]"), std::string::npos) << src;
    }
  o.disabled_passes = {"fp8_promote"};
  auto lowered = run_tile_pipeline(parse(fp8_nt_kernel("f8e4m3", "f8e4m3")), o, false, false, true).program;
  const std::string src = cuda_build_program(*lowered, o, "sm_90").sources.at(Stage::cuda);
  EXPECT_NE(src.find("m64n64k32.f32.e4m3.e4m3"), std::string::npos) << src;
  EXPECT_EQ(src.find("mma_p"), std::string::npos) << src;
}

}  // namespace METILE_UNITY_ID
}  // namespace metile
