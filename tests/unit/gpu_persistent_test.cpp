// Persistent tiles for TMA wgmma pipelines (lower_persistent.cpp): a loop over output tiles
// around a TMA-only K loop sets its mbarriers up once, issues the first tile's stages before
// it and each next tile's stages before the tile's epilogue, and reads the thread index in
// the epilogue through an opaque copy; the loops it must leave alone; METILE_GPU_OFF
// (LowerOptions::persistent); NVRTC compiles for sm_90a (no GPU needed). On an H100 the kernel
// suite's *_persistent GEMMs run it against interp.
#include <gtest/gtest.h>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_parse.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "target/options.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

LowerOptions options(int threads, bool persistent = true) {
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = threads;
  o.persistent = persistent;
  return o;
}

kernels::GemmConfig persistent_gemm(DType d, int bm, int bn, int bk, bool bounds) {
  kernels::GemmConfig g = kernels::gemm_config(d, bm, bn, bk, bounds);
  g.persistent = true;
  return g;
}

// What compile_kernel lowers: the program after the Tile IR passes (checked).
gpu::Function lowered(const Program& program, const LowerOptions& o) {
  return lower_to_gpu(*run_tile_pipeline(program, CompileOptions{}, false).program, nvidia_gpu_target("sm_90"), o);
}

std::string gpu_ir(const Program& program, const LowerOptions& o) { return gpu::print(lowered(program, o)); }

TEST(GpuPersistent, TheNextTilesStagesAreIssuedBeforeTheEpilogue) {
  for (DType d : {DType::f16, DType::bf16})
    for (bool bounds : {true, false}) {
      const std::string text = gpu_ir(kernels::gemm(persistent_gemm(d, 128, 128, 64, bounds)), options(256));
      // Three stages: the first tile's two before the loop over tiles, one per K step, the next
      // tile's two after the K loop; A and B each.
      EXPECT_EQ(count(text, " tma_load "), 10) << text;
      EXPECT_EQ(count(text, " mbar_init "), 1) << text;
      EXPECT_LT(text.find(" mbar_init "), text.find(" for ")) << "set up once, before the tiles\n" << text;
      EXPECT_LT(text.find(" tma_load "), text.find(" for ")) << "the first tile's stages first\n" << text;
      EXPECT_EQ(count(text, " opaque "), 1) << text;
      // After the K loop: every wgmma waited for, a barrier, the next tile's copies, then the
      // epilogue's stores through the opaque thread index.
      const size_t sync = text.rfind(" warpgroup_sync");
      ASSERT_NE(sync, std::string::npos) << text;
      const size_t next = text.find(" tma_load ", sync), opaque = text.find(" opaque ", sync);
      EXPECT_LT(text.find(" barrier", sync), next) << text;
      EXPECT_LT(next, opaque) << text;
      EXPECT_LT(opaque, text.find("store", opaque)) << text;
      EXPECT_NE(text.find("tile_base"), std::string::npos) << "stages and phases counted across tiles\n" << text;
    }
}

TEST(GpuPersistent, SwitchedOffEachTileFillsItsOwnPipeline) {
  const Program program = kernels::gemm(persistent_gemm(DType::f16, 128, 128, 64, true));
  const std::string text = gpu_ir(program, options(256, false));
  EXPECT_EQ(count(text, " tma_load "), 6) << text;
  EXPECT_EQ(count(text, " opaque "), 0) << text;
  EXPECT_GT(text.find(" mbar_init "), text.find(" for ")) << "set up in each tile\n" << text;
  CompileOptions c;
  c.disabled_passes = {"persistent"};
  const std::string piece_off = run_gpu_pipeline(*run_tile_pipeline(program, c, false).program,
                                                 nvidia_gpu_target("sm_90"), c, "cuda")
                                    .gpu_ir;
  EXPECT_EQ(count(piece_off, " opaque "), 0) << "METILE_GPU_OFF=persistent\n" << piece_off;
  EXPECT_EQ(count(piece_off, " tma_load "), 6) << piece_off;
  // Without TMA (or on sm_80) nothing is issued a tile ahead.
  LowerOptions no_tma = options(256);
  no_tma.tma = false;
  EXPECT_EQ(count(gpu_ir(program, no_tma), " opaque "), 0);
  const Program f32 = kernels::gemm(persistent_gemm(DType::f32, 64, 64, 32, true));
  EXPECT_EQ(count(gpu::print(lower_to_gpu(*run_tile_pipeline(f32, CompileOptions{}, false).program,
                                          nvidia_gpu_target("sm_80"), options(128))),
                  " opaque "),
            0);
}

// A loop over tiles the rotation must leave alone: its K loop's end depends on the tile (the
// tiles' iteration counts differ), or the tile writes the buffer the copies read (the next
// tile's copies would move ahead of that store).
Program tile_loop(bool k_per_tile, bool store_into_a) {
  using kernels::V;
  kernels::KernelBuilder k(k_per_tile ? "k_per_tile" : "stores_into_a");
  V a = k.ptr("A", DType::f16), b = k.ptr("B", DType::f16), c = k.ptr("C", store_into_a ? DType::f16 : DType::f32);
  V m = k.scalar("M"), n = k.scalar("N"), kk = k.scalar("K");
  V tiles_n = (n + 127) / 128;
  V tiles = (m + 127) / 128 * tiles_n;
  k.tile_range(k.program_id(0), tiles, k.num_programs(0), {}, [&](V t, const std::vector<V>&) {
    V row = t / tiles_n * 128, col = t % tiles_n * 128;
    V end = k_per_tile ? kk - t * 64 : kk;
    V acc = k.tile_range(k.i32(0), end, k.i32(64), {k.zeros(Shape::of(128, 128))},
                         [&](V kv, std::vector<V> carried) -> std::vector<V> {
                           V ta = k.tile_load(a, row, kv, kk, Shape::of(128, 64), m, kk);
                           V tb = k.tile_load(b, kv, col, n, Shape::of(64, 128), kk, n);
                           return {k.dot(ta, tb, carried[0])};
                         })[0];
    if (store_into_a)
      k.tile_store(a, row, col, kk, k.cast(acc, DType::f16), m, kk);
    else
      k.tile_store(c, row, col, n, acc, m, n);
    return std::vector<V>{};
  });
  return k.finish();
}

TEST(GpuPersistent, TileLoopsItMustLeaveAlone) {
  for (bool k_per_tile : {true, false}) {
    const std::string text = gpu_ir(tile_loop(k_per_tile, !k_per_tile), options(256));
    EXPECT_EQ(count(text, " opaque "), 0) << text;
    EXPECT_EQ(count(text, " tma_load "), 6) << "the K loop keeps its own TMA pipeline\n" << text;
  }
  EXPECT_EQ(count(gpu_ir(tile_loop(false, false), options(256)), " opaque "), 1) << "the control case";
}

TEST(GpuPersistent, CudaNamesTheOpaqueThreadIndex) {
  CudaKernelSource s = emit_cuda(lowered(kernels::gemm(persistent_gemm(DType::f16, 128, 256, 64, true)), options(256)));
  // persistent_range's step, num_programs, is never 0 on a launch: no zero-step check and no
  // hidden error flag to read back after each launch (check_loop_steps.cpp).
  EXPECT_EQ(count(s.source, "loop_error"), 0) << s.source;
  EXPECT_EQ(count(s.source, "asm volatile(\"\" : \"+r\"(tile_tid));"), 1) << s.source;
  EXPECT_EQ(count(s.source, "mt_mbar_init(tma_bar"), 3) << "once, before the tiles\n" << s.source;
}

// `opaque` takes one integer scalar per thread (the verifier names what it got).
TEST(GpuPersistent, OpaqueTakesOneIntegerScalar) {
  const std::string ok = "gpu_kernel @k(%x: ptr<f32>) threads=32 simd=32 {\n"
                         "  %tid: i32 thread = builtin thread_index.x\n"
                         "  %t: i32 thread = opaque %tid\n"
                         "}\n";
  EXPECT_EQ(gpu::print(gpu::parse(ok)), ok);
  std::string bad = ok;
  bad.replace(bad.find("opaque %tid"), 11, "opaque %x");
  bad.replace(bad.find("%t: i32 thread"), 14, "%t: ptr<f32>");
  try {
    gpu::parse(bad);
    ADD_FAILURE() << "a pointer was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("takes one integer scalar"), std::string::npos) << e.what();
  }
}

// f16 and bf16, checked and unchecked bounds, one and two warpgroups: the persistent TMA
// kernels compile for sm_90a.
TEST(GpuPersistent, VariantsCompileThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  struct Variant {
    DType d;
    int bm, bn, bk, threads;
    bool bounds;
  };
  for (const Variant& v : {Variant{DType::f16, 128, 256, 64, 256, true}, Variant{DType::bf16, 64, 64, 16, 128, true},
                           Variant{DType::bf16, 128, 128, 64, 256, false}}) {
    CudaKernelSource s = emit_cuda(lowered(kernels::gemm(persistent_gemm(v.d, v.bm, v.bn, v.bk, v.bounds)), options(v.threads)));
    ASSERT_GE(count(s.source, "tile_tid"), 2) << s.source;
    ASSERT_GT(count(s.source, "mt_tma_load_2d("), 2) << v.bm << "x" << v.bn << "x" << v.bk;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log))
        << dtype_name(v.d) << " " << v.bm << "x" << v.bn << "x" << v.bk << "\n" << log << s.source;
  }
}

}  // namespace
}  // namespace metile
