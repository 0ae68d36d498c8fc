// TMA copies (cp.async.bulk.tensor with mbarriers) for pipelined wgmma dots: which loads take
// them, the GPU IR and CUDA they produce, the tensor maps the kernel declares, the runtime's
// encoding rules (and the cases that fall back to cp.async), and NVRTC compiles the variants
// for sm_90a (no GPU needed). On an H100 the kernel suite's GEMMs run them against interp.
#include <gtest/gtest.h>

#include "codegen/cuda/cuda.h"
#include "golden.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/tile/tile_pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/tma_map.h"
#include "support/error.h"
#include "target/options.h"
#include "target/tma.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

LowerOptions options(int threads = 0, bool tma = true) {
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = threads;
  o.tma = tma;
  return o;
}

gpu::Function lowered(const kernels::GemmConfig& g, const LowerOptions& o, const std::string& arch = "sm_90") {
  return lower_to_gpu(kernels::gemm(g), nvidia_gpu_target(arch), o);
}

std::string gpu_ir(const kernels::GemmConfig& g, const LowerOptions& o, const std::string& arch = "sm_90") {
  return gpu::print(lowered(g, o, arch));
}

TEST(GpuTmaLower, BoundedWgmmaOperandsAreCopiedByTma) {
  for (DType d : {DType::f16, DType::bf16}) {
    const std::string text = gpu_ir(kernels::gemm_config(d, 128, 128, 64, true), options(256));
    // Three stages: two prefetched before the loop and one per iteration, for A and for B.
    EXPECT_EQ(count(text, " tma_load "), 6) << text;
    EXPECT_EQ(count(text, " mbar_init "), 1) << text;
    EXPECT_EQ(count(text, " mbar_wait "), 1) << text;
    EXPECT_EQ(count(text, " async_copy "), 0) << "no cp.async left\n" << text;
    EXPECT_EQ(count(text, "count=2 n=3"), 1) << "two arrivals per stage, three stages\n" << text;
    // One wgmma group stays in flight: no wait and barrier at the top of the body, a wait for
    // all but one group and a barrier before the bottom's copies, a full wait after the loop.
    EXPECT_EQ(count(text, " warpgroup_wait pending=1"), 1) << text;
    EXPECT_EQ(count(text, " warpgroup_sync"), 1) << text;
    EXPECT_EQ(count(text, " barrier"), 2) << "after mbar_init and before the bottom's copies\n" << text;
  }
}

TEST(GpuTmaLower, OtherLoadsKeepTheAsyncCopies) {
  auto async_only = [](const std::string& text) {
    return count(text, " tma_load ") == 0 && count(text, "mbar_") == 0 && count(text, " async_copy ") == 6;
  };
  EXPECT_TRUE(async_only(gpu_ir(kernels::gemm_config(DType::f16, 128, 128, 64, true), options(256, false))))
      << "switched off (METILE_GPU_OFF=tma)";
  EXPECT_TRUE(async_only(gpu_ir(kernels::gemm_config(DType::f16, 128, 128, 64, false), options(256))))
      << "no bounds: no tensor extent to describe";
  EXPECT_TRUE(async_only(gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 32, true), options(128), "sm_80")))
      << "pre-Hopper (mma.sync)";
  LowerOptions one = options(256);
  one.num_stages = 1;
  const std::string unpiped = gpu_ir(kernels::gemm_config(DType::f16, 128, 128, 64, true), one);
  EXPECT_EQ(count(unpiped, " tma_load "), 0) << "only pipelined loops\n" << unpiped;
}

// What compile_kernel lowers: the program after the Tile IR passes, checked (the default) or not.
gpu::Function lowered_after_passes(const Program& program, bool unchecked, const LowerOptions& o) {
  CompileOptions c;
  c.unchecked = unchecked;
  return lower_to_gpu(*run_tile_pipeline(program, c, false).program, nvidia_gpu_target("sm_90"), o);
}

std::vector<TmaMap> maps_of(const gpu::Function& f) {
  CudaKernelSource s = emit_cuda(f);
  std::vector<TmaMap> maps;
  EXPECT_TRUE(parse_tma_maps(s.tensor_maps, &maps)) << s.tensor_maps;
  return maps;
}

// Checked programs take TMA: the bounds pass's MINIMUM(given, buffer's) becomes the given bound
// with clamp=1 (the runtime clamps as the pass does), its default matrix "*" with clamp=1.
TEST(GpuTmaLower, CheckedProgramsTakeTmaWithTheBufferClamp) {
  const Program bounded = kernels::gemm(kernels::gemm_config(DType::f16, 128, 128, 64, true));
  std::vector<TmaMap> maps = maps_of(lowered_after_passes(bounded, false, options(256)));
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].text(), "param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128 clamp=1");
  EXPECT_EQ(maps[1].text(), "param=1 rows=p5 cols=p4 ld=p4 elem=2 box=64x64 swizzle=128 clamp=1");
  maps = maps_of(lowered_after_passes(bounded, true, options(256)));
  ASSERT_EQ(maps.size(), 2u) << "unchecked: the given bounds as they are";
  EXPECT_EQ(maps[0].text(), "param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128 clamp=0");
  const Program plain = kernels::gemm(kernels::gemm_config(DType::bf16, 128, 128, 64, false));
  for (bool unchecked : {false, true}) {
    maps = maps_of(lowered_after_passes(plain, unchecked, options(256)));
    ASSERT_EQ(maps.size(), 2u) << "no bounds: the buffer's matrix, unchecked " << unchecked;
    EXPECT_EQ(maps[0].text(), "param=0 rows=* cols=* ld=p5 elem=2 box=128x64 swizzle=128 clamp=1");
    EXPECT_EQ(maps[1].text(), "param=1 rows=* cols=* ld=p4 elem=2 box=64x64 swizzle=128 clamp=1");
  }
  const std::string text = gpu::print(lowered_after_passes(bounded, false, options(256)));
  EXPECT_EQ(count(text, " tma_load "), 6) << text;
  EXPECT_EQ(count(text, " async_copy "), 0) << text;
}

// A bound the user wrote as a minimum is no parameter or constant: that operand keeps cp.async
// (the clamp is never taken for the bounds pass's, nor dropped). A forged `bounds` attribute is
// removed by the pass.
TEST(GpuTmaLower, UserMinimumBoundsKeepTheAsyncCopies) {
  std::string text = print(kernels::gemm(kernels::gemm_config(DType::f16, 128, 128, 64, true)));
  // A's row bound M becomes minimum(M, 1000), written first; B's load gets a forged attribute.
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << "\n" << text;
    text.replace(at, from.size(), to);
  };
  replace("{\n", "{\n  %900 = const {value = 1000} : i32\n  %901 = minimum %M, %900 : i32\n");
  replace("tile_load %A, %3, %11, %K, %M, %K :", "tile_load %A, %3, %11, %K, %901, %K :");
  replace("tile_load %B, %11, %5, %N, %K, %N :", "tile_load %B, %11, %5, %N, %K, %N {bounds = \"buffer\"} :");
  const Program user = parse(text);
  for (bool unchecked : {false, true}) {
    const std::string gpu = gpu::print(lowered_after_passes(user, unchecked, options(256)));
    EXPECT_EQ(count(gpu, " tma_load "), 3) << "B only, unchecked " << unchecked << "\n" << gpu;
    EXPECT_EQ(count(gpu, " async_copy "), 3) << "A keeps cp.async, unchecked " << unchecked << "\n" << gpu;
    EXPECT_EQ(count(gpu, "param=1 rows=p5 cols=p4 ld=p4 elem=2 box=64x64 swizzle=128 clamp=" +
                              std::string(unchecked ? "0" : "1")),
              3)
        << "the forged attribute is gone\n" << gpu;
  }
}

// `bounds` is an optional string attribute of tile_load/tile_store (ops.def "bounds?:str"): a
// program may go without it, and the verifier still refuses a wrong kind, a second copy, and
// attributes the table does not name.
TEST(GpuTmaLower, TheBoundsAttributeIsOptionalAndChecked) {
  const std::string text = print(kernels::gemm(kernels::gemm_config(DType::f16, 64, 64, 32, true)));
  const std::string load = "tile_load %A, %3, %11, %K, %M, %K :";
  const size_t at = text.find(load);
  ASSERT_NE(at, std::string::npos) << text;
  auto with = [&](const std::string& attrs) {
    std::string t = text;
    t.replace(at, load.size(), "tile_load %A, %3, %11, %K, %M, %K " + attrs + " :");
    return t;
  };
  EXPECT_NO_THROW(parse(with("{bounds = \"clamped\"}")));
  for (const char* bad : {"{bounds = 1}", "{bounds = \"buffer\", bounds = \"clamped\"}", "{other = \"x\"}"}) {
    try {
      parse(with(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tile_load"), std::string::npos) << bad << ": " << e.what();
    }
  }
}

TEST(GpuTmaLower, GoldenGpuIr) {
  expect_golden(gpu_ir(kernels::gemm_config(DType::bf16, 128, 128, 64, true), options(256)), "gemm_bf16_wgmma_tma.gpuir",
                "the TMA wgmma GEMM's GPU IR");
}

TEST(GpuTmaLower, CudaDeclaresOneTensorMapPerOperand) {
  CudaKernelSource s = emit_cuda(lowered(kernels::gemm_config(DType::f16, 128, 128, 64, true), options(256)));
  EXPECT_EQ(count(s.source, "const __grid_constant__ mt_tensor_map mt_tmap0"), 1) << s.source;
  EXPECT_EQ(count(s.source, "const __grid_constant__ mt_tensor_map mt_tmap1"), 1) << s.source;
  EXPECT_EQ(count(s.source, "cp.async.bulk.tensor.2d"), 1) << "the prelude's helper\n" << s.source;
  // A: one 128 x 64 box; B (64 x 128): two 64 x 64 boxes, 8192 bytes apart. Three sites each.
  EXPECT_EQ(count(s.source, ", &mt_tmap0, "), 3) << s.source;
  EXPECT_EQ(count(s.source, ", &mt_tmap1, "), 6) << s.source;
  EXPECT_EQ(count(s.source, "mt_mbar_expect_tx(tma_bar"), 6) << s.source;
  std::vector<TmaMap> maps;
  ASSERT_TRUE(parse_tma_maps(s.tensor_maps, &maps)) << s.tensor_maps;
  ASSERT_EQ(maps.size(), 2u) << s.tensor_maps;
  // matmul(A, B, C, M, N, K): A is M x K with row stride K, B is K x N with row stride N.
  EXPECT_EQ(maps[0].text(), "param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128 clamp=0");
  EXPECT_EQ(maps[1].text(), "param=1 rows=p5 cols=p4 ld=p4 elem=2 box=64x64 swizzle=128 clamp=0");
}

TEST(TmaMap, TextRoundTripsAndMalformedLinesAreRefused) {
  TmaMap m{2, "p3", "64", "p4", 2, 128, 32, 64, true};
  std::vector<TmaMap> out;
  ASSERT_TRUE(parse_tma_maps(m.text() + "\n" + m.text() + "\n", &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], m);
  for (const char* bad : {"param=0 rows=p1", "param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128y64 swizzle=128",
                          "param=x rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128",
                          "param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128 clamp=0 extra=1",
                          "param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128"}) {
    std::vector<TmaMap> none;
    EXPECT_FALSE(parse_tma_maps(bad, &none)) << bad;
  }
}

// What the runtime passes to cuTensorMapEncodeTiled, and where a launch falls back to the build
// without TMA: misaligned base or row stride, empty or too large bounds, non-integer sources,
// a tensor reaching past its buffer.
TEST(TmaMap, EncodingFollowsTmasRules) {
  const TmaMap a{0, "p3", "p5", "p5", 2, 128, 64, 128};
  constexpr uint64_t kBytes = uint64_t{1} << 30;  // the base pointer's buffer, from the base on
  auto args = [](int64_t m, int64_t k) {
    return [=](int64_t i) -> std::optional<int64_t> {
      if (i == 3) return m;
      if (i == 5) return k;
      return std::nullopt;
    };
  };
  std::string why;
  std::optional<cuda::TmaEncoding> e = cuda::tma_encoding(a, 0x10000, kBytes, args(300, 200), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[0], 200u);
  EXPECT_EQ(e->dims[1], 300u);
  EXPECT_EQ(e->stride[0], 400u);
  EXPECT_EQ(e->rank, 2u);
  EXPECT_EQ(e->box[0], 64u);
  EXPECT_EQ(e->box[1], 128u);
  EXPECT_EQ(e->swizzle, 3);
  EXPECT_EQ(e->data_type, 1);
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10008, kBytes, args(300, 200), &why)) << "base not 16-byte aligned";
  EXPECT_NE(why.find("base address"), std::string::npos) << why;
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, kBytes, args(300, 201), &why)) << "402-byte rows";
  EXPECT_NE(why.find("row stride"), std::string::npos) << why;
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, kBytes, args(0, 200), &why)) << "no rows";
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, kBytes, args(int64_t{1} << 31, 200), &why)) << "rows past i32";
  const TmaMap consts{0, "100", "p9", "64", 2, 64, 32, 64};
  EXPECT_FALSE(cuda::tma_encoding(consts, 0x10000, kBytes, args(1, 1), &why)) << "p9 is no integer argument";
  const TmaMap fixed{0, "100", "64", "64", 2, 64, 32, 64};
  e = cuda::tma_encoding(fixed, 0x10000, kBytes, args(1, 1), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[1], 100u);
  EXPECT_EQ(e->swizzle, 2);
  // The tensor must lie inside its buffer: 300 rows of 200 f16 end at byte 120000 exactly.
  EXPECT_TRUE(cuda::tma_encoding(a, 0x10000, 120000, args(300, 200), &why)) << why;
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, 119999, args(300, 200), &why)) << "one byte short";
  EXPECT_NE(why.find("reaches past its buffer"), std::string::npos) << why;
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, kBytes, args(int64_t{1} << 30, 200), &why)) << "rows past it";
  // Huge strides and bounds do not wrap the size computation around.
  const TmaMap wide{0, "p3", "p5", "p6", 4, 64, 32, 128};
  auto huge = [](int64_t i) -> std::optional<int64_t> {
    if (i == 3) return (int64_t{1} << 31) - 1;
    if (i == 5) return 64;
    if (i == 6) return (int64_t{1} << 38) - 4;
    return std::nullopt;
  };
  EXPECT_FALSE(cuda::tma_encoding(wide, 0x10000, ~uint64_t{0}, huge, &why)) << "2^69 bytes";
  EXPECT_NE(why.find("reaches past its buffer"), std::string::npos) << why;
}

// clamp=1 (checked programs): the runtime keeps the given matrix inside the buffer as the bounds
// pass does, rows = min(rows, avail // ld) and cols = min(cols, ld), "*" for a bound not given;
// what cannot be clamped to at least one row falls back.
TEST(TmaMap, ClampedBoundsFollowTheBoundsPass) {
  TmaMap a{0, "p3", "p5", "p6", 2, 128, 64, 128};
  a.clamp = true;
  constexpr int64_t kNotGiven = -7;  // a parameter that is no integer argument
  auto args = [](int64_t rows, int64_t cols, int64_t ld) {
    return [=](int64_t i) -> std::optional<int64_t> {
      if (i == 3) return rows;
      if (i == 5) return cols;
      if (i == 6) return ld;
      return std::nullopt;
    };
  };
  std::string why;
  // 300 x 200 at a row stride of 256 in a buffer of 100 whole rows and a part: 100 rows.
  const uint64_t bytes = (100 * 256 + 50) * 2 + 1;
  std::optional<cuda::TmaEncoding> e = cuda::tma_encoding(a, 0x10000, bytes, args(300, 200, 256), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[1], 100u) << "rows clamped to the buffer's whole rows";
  EXPECT_EQ(e->dims[0], 200u);
  EXPECT_EQ(e->stride[0], 512u);
  e = cuda::tma_encoding(a, 0x10000, bytes, args(40, 300, 256), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[1], 40u) << "the given rows when fewer";
  EXPECT_EQ(e->dims[0], 256u) << "cols clamped to the row stride";
  // Without clamp the same launch falls back (the tensor reaches past the buffer).
  TmaMap plain = a;
  plain.clamp = false;
  EXPECT_FALSE(cuda::tma_encoding(plain, 0x10000, bytes, args(300, 200, 256), &why));
  EXPECT_NE(why.find("reaches past its buffer"), std::string::npos) << why;
  // The default matrix: avail // ld rows of ld.
  TmaMap all = a;
  all.rows = all.cols = "*";
  e = cuda::tma_encoding(all, 0x10000, bytes, args(kNotGiven, kNotGiven, 256), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[1], 100u);
  EXPECT_EQ(e->dims[0], 256u);
  TmaMap star = all;
  star.clamp = false;
  EXPECT_FALSE(cuda::tma_encoding(star, 0x10000, bytes, args(1, 1, 256), &why)) << "\"*\" needs clamp";
  // A buffer smaller than one row, a row stride that is not positive, no given rows, a negative
  // bound: nothing TMA can describe, the guarded build reads (zeros).
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, 511, args(300, 200, 256), &why)) << "less than a row";
  EXPECT_NE(why.find("empty"), std::string::npos) << why;
  EXPECT_TRUE(cuda::tma_encoding(a, 0x10000, 512, args(300, 200, 256), &why)) << "exactly one row: " << why;
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, bytes, args(300, 200, 0), &why)) << "row stride 0";
  EXPECT_NE(why.find("not positive"), std::string::npos) << why;
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, bytes, args(300, 200, -256), &why)) << "negative row stride";
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, bytes, args(0, 200, 256), &why)) << "no rows given";
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, bytes, args(-5, 200, 256), &why)) << "negative rows";
  EXPECT_FALSE(cuda::tma_encoding(all, 0x10000, 0, args(1, 1, 256), &why)) << "an empty buffer";
  // A huge buffer does not overflow avail; rows past 2^31 - 1 still fall back.
  e = cuda::tma_encoding(all, 0x10000, ~uint64_t{0}, args(1, 1, 8), &why);
  EXPECT_FALSE(e) << "2^63 rows";
  e = cuda::tma_encoding(a, 0x10000, ~uint64_t{0}, args(1000, 8, 8), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[1], 1000u);
  // Round trip of the text with clamp and "*".
  std::vector<TmaMap> out;
  ASSERT_TRUE(parse_tma_maps(all.text(), &out)) << all.text();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], all);
  std::vector<TmaMap> none;
  EXPECT_FALSE(parse_tma_maps(star.text(), &none)) << star.text();
  EXPECT_FALSE(parse_tma_maps("param=0 rows=p3 cols=p5 ld=p5 elem=2 box=128x64 swizzle=128 clamp=2", &none));
}

// A stack of matrices (slabs=1, attention's K and V per (batch, head)): 3-D, the slabs rows * ld
// apart, as many as lie wholly inside the buffer; clamped, a buffer ending inside a slab falls back.
TEST(TmaMap, SlabsStackTheMatricesInThirdDimension) {
  TmaMap a{1, "p5", "128", "128", 2, 128, 64, 128};
  a.slabs = true;
  auto seq = [](int64_t rows) {
    return [=](int64_t i) -> std::optional<int64_t> { return i == 5 ? std::optional<int64_t>(rows) : std::nullopt; };
  };
  std::string why;
  const uint64_t bytes = 8 * 200 * 128 * 2;  // 8 (batch, head) slabs of 200 rows
  std::optional<cuda::TmaEncoding> e = cuda::tma_encoding(a, 0x10000, bytes, seq(200), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->rank, 3u);
  EXPECT_EQ(e->dims[0], 128u);
  EXPECT_EQ(e->dims[1], 200u);
  EXPECT_EQ(e->dims[2], 8u);
  EXPECT_EQ(e->stride[0], 256u);
  EXPECT_EQ(e->stride[1], 200u * 256u);
  EXPECT_EQ(e->box[2], 1u);
  EXPECT_TRUE(cuda::tma_encoding(a, 0x10000, bytes - 2, seq(200), &why)) << why;
  EXPECT_EQ(cuda::tma_encoding(a, 0x10000, bytes - 2, seq(200), &why)->dims[2], 7u) << "the last slab is cut";
  EXPECT_FALSE(cuda::tma_encoding(a, 0x10000, 199 * 256, seq(200), &why)) << "not one whole slab";
  TmaMap c = a;
  c.clamp = true;
  e = cuda::tma_encoding(c, 0x10000, bytes, seq(200), &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->dims[2], 8u);
  EXPECT_EQ(e->dims[1], 200u);
  EXPECT_FALSE(cuda::tma_encoding(c, 0x10000, bytes + 256, seq(200), &why)) << "a row past the last slab";
  EXPECT_NE(why.find("inside a slab"), std::string::npos) << why;
  EXPECT_FALSE(cuda::tma_encoding(c, 0x10000, bytes, seq(3000), &why)) << "fewer rows than a slab";
  // 2^31 elements in 2^16 slabs of 256 x 128: the last slab's i32 offset would wrap.
  EXPECT_FALSE(cuda::tma_encoding(c, 0x10000, uint64_t{1} << 32, seq(256), &why)) << "offsets past i32";
  EXPECT_NE(why.find("2^31"), std::string::npos) << why;
  EXPECT_TRUE(cuda::tma_encoding(c, 0x10000, (uint64_t{1} << 32) - 256 * 256, seq(256), &why)) << why;
  std::vector<TmaMap> out;
  ASSERT_TRUE(parse_tma_maps(c.text(), &out)) << c.text();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], c);
  EXPECT_EQ(c.text(), "param=1 rows=p5 cols=128 ld=128 elem=2 box=128x64 swizzle=128 clamp=1 slabs=1");
  std::vector<TmaMap> none;
  EXPECT_FALSE(parse_tma_maps("param=1 rows=p5 cols=128 ld=128 elem=2 box=128x64 swizzle=128 clamp=1 slabs=0", &none));
}

// f16 and bf16, the swizzles (K rows of 32, 64 and 128 bytes), one and two warpgroups, N up to
// 256 per warpgroup: the TMA kernels compile for sm_90a.
TEST(GpuTmaLower, VariantsCompileThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  struct Variant {
    DType d;
    int bm, bn, bk, threads;
  };
  for (const Variant& v : {Variant{DType::f16, 64, 64, 16, 0}, Variant{DType::bf16, 64, 64, 32, 0},
                           Variant{DType::f16, 128, 256, 64, 256}, Variant{DType::bf16, 128, 128, 64, 256}}) {
    CudaKernelSource s = emit_cuda(lowered(kernels::gemm_config(v.d, v.bm, v.bn, v.bk, true), options(v.threads)));
    ASSERT_GT(count(s.source, "mt_tma_load_2d("), 1) << v.bm << "x" << v.bn << "x" << v.bk;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log))
        << dtype_name(v.d) << " " << v.bm << "x" << v.bn << "x" << v.bk << "\n" << log << s.source;
  }
}

}  // namespace
}  // namespace metile
