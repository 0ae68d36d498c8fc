// Double buffering of a GEMM's K loop on Apple GPUs (lower_double_buffer.cpp): two threadgroup
// stages, the next iteration's tiles loaded into registers before the mma and stored into the
// other stage after it, one barrier per iteration; the single-buffer loop when two stages do
// not fit or the piece is off (LowerOptions::double_buffer, METILE_GPU_OFF=double_buffer,
// num_stages 1). The suite GEMMs run on metal-sim with the piece on (Devices/KernelSuite) and
// off (ctest metal_sim_gemm_single_buffer), against interp and float64.
#include <gtest/gtest.h>

#include "codegen/metal/msl.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "ir/walk.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

LowerOptions metal(int stages = 0, bool double_buffer = true) {
  LowerOptions o;
  o.device = "metal-sim";
  o.num_stages = stages;
  o.double_buffer = double_buffer;
  return o;
}

gpu::Function lower(const kernels::GemmConfig& g, const LowerOptions& o, const GpuTarget& t = apple_gpu_target()) {
  return lower_to_gpu(kernels::gemm(g), t, o);
}

// Metal 4's f32 tensor_ops atom rounds to TF32 on M5-class parts: it serves dots that allow it.
Program allowing_tf32(Program p) {
  walk_mut(p.body, [](Op& op) {
    if (op.kind == OpKind::DOT) op.set_attr("input_precision", std::string("tf32"));
  });
  return p;
}

// The text of the K loop's body (the GEMM has one loop at the top level).
std::string loop_body(const std::string& text) {
  const size_t at = text.find("\n  for %i");
  EXPECT_NE(at, std::string::npos) << text;
  return text.substr(at, text.find("\n  }", at) - at);
}

uint64_t stage_bytes(int m, int n, int k, DType d) {  // A and B of one stage, rows padded by 16 bytes
  const int pad = 16 / static_cast<int>(dtype_size(d));
  return static_cast<uint64_t>(m * (k + pad) + k * (n + pad)) * dtype_size(d);
}

TEST(DoubleBuffer, TwoStagesOneBarrierPerIteration) {
  for (DType d : {DType::f16, DType::f32}) {
    const kernels::GemmConfig g = kernels::gemm_config(d, d == DType::f32 ? 32 : 64, d == DType::f32 ? 32 : 64, 32, true);
    gpu::Function f = lower(g, metal());
    const std::string text = gpu::print(f), body = loop_body(text);
    SCOPED_TRACE(dtype_name(d));
    EXPECT_EQ(gpu::threadgroup_bytes(f), 2 * stage_bytes(g.block_m, g.block_n, g.block_k, d));
    // Iteration 0 copied straight into stage 0 before the loop, then one barrier.
    EXPECT_EQ(count(text, " async_copy "), 2) << text;
    EXPECT_EQ(count(text, " barrier"), 2) << text;
    EXPECT_EQ(count(body, " async_copy "), 0) << body;
    // In the loop: A's and B's next tiles into registers (bounded, zeros past the end), the mma
    // on this iteration's stage, the registers into the other stage, the one barrier.
    EXPECT_EQ(count(body, " barrier"), 1) << body;
    EXPECT_EQ(count(body, "%a_next: "), 1) << body;
    EXPECT_EQ(count(body, "%b_next: "), 1) << body;
    EXPECT_EQ(count(body, " = lt %next_k, %K"), 1) << body;
    EXPECT_EQ(count(body, "%in_range"), 3) << "next_k < K guards both loads\n" << body;
    const size_t loads = body.find("%a_next: "), mma = body.find(" mma "), stores = body.find("store ", mma),
                 barrier = body.find(" barrier");
    EXPECT_LT(loads, mma) << body;
    EXPECT_LT(mma, stores) << body;
    EXPECT_LT(stores, barrier) << body;
    EXPECT_EQ(count(body, ", %a_next"), 1) << body;
    EXPECT_EQ(count(body, ", %b_next"), 1) << body;
    EXPECT_EQ(count(text, "async_wait"), 0) << "Metal's copies are synchronous\n" << text;
    // The printed GPU IR parses, verifies and runs through the GPU passes.
    EXPECT_NO_THROW(run_gpu_passes_on_text(text, {}, apple_gpu_target())) << text;
  }
}

TEST(DoubleBuffer, MslLoadsAheadInVectors) {
  const Program program = kernels::gemm(kernels::gemm_config(DType::f16, 64, 64, 32, true));
  const std::string msl = emit_msl(run_gpu_pipeline(program, apple_gpu_target(), {}, "metal-sim").function).source;
  // The kernel's own barriers (the stop-word check's helper above it has two of its own).
  EXPECT_EQ(count(msl.substr(msl.find("[[kernel]]")), "threadgroup_barrier("), 2) << msl;
  EXPECT_EQ(count(msl, " a_next_vec = *(device const packed_half4*)(A + "), 1) << msl;
  EXPECT_EQ(count(msl, " b_next_vec = *(device const packed_half4*)(B + "), 1) << msl;
  EXPECT_EQ(count(msl, "simdgroup_load(mma_a[mma_i], (a_smem + (stage * 2560)) + "), 1) << msl;
  EXPECT_EQ(count(msl, "*(threadgroup packed_half4*)(a_smem + (next_stage * 2560) + "), 1) << msl;
  EXPECT_EQ(count(msl, " = half4(a_next[c], a_next[c + 1], a_next[c + 2], a_next[c + 3]);"), 1) << msl;
}

TEST(DoubleBuffer, SwitchedOffOrOneStageKeepsTheSingleBuffer) {
  const kernels::GemmConfig g = kernels::gemm_config(DType::f16, 64, 64, 32, true);
  for (const LowerOptions& o : {metal(1), metal(0, false), metal(4, false)}) {
    gpu::Function f = lower(g, o);
    const std::string text = gpu::print(f), body = loop_body(text);
    EXPECT_EQ(gpu::threadgroup_bytes(f), stage_bytes(64, 64, 32, DType::f16));
    EXPECT_EQ(count(body, " async_copy "), 2) << body;
    EXPECT_EQ(count(body, " barrier"), 2) << "before and after the mma\n" << body;
    EXPECT_EQ(count(text, "_next"), 0) << text;
  }
  // Stages past two on Metal are still two (registers hold one iteration ahead).
  EXPECT_EQ(gpu::threadgroup_bytes(lower(g, metal(4))), 2 * stage_bytes(64, 64, 32, DType::f16));
}

TEST(DoubleBuffer, TilesThatDoNotFitTwiceKeepTheSingleBuffer) {
  // f32 64x32x32: 13.5 KB a stage, two exceed 3/4 of Apple's 32 KB.
  gpu::Function f = lower(kernels::gemm_config(DType::f32, 64, 32, 32, true), metal());
  EXPECT_EQ(gpu::threadgroup_bytes(f), stage_bytes(64, 32, 32, DType::f32));
  EXPECT_EQ(count(loop_body(gpu::print(f)), " barrier"), 2);
  // 1-row tiles have no matrix atom: exact FMAs over operands staged through registers, no
  // direct copies and so no double buffering.
  kernels::GemmConfig m1 = kernels::gemm_config(DType::f32, 1, 32, 16, true);
  EXPECT_EQ(count(gpu::print(lower(m1, metal())), "_next"), 0);
  // Metal 4 tensor_ops (an M5) pass the accumulator through an f32 m x n array, which counts
  // once: f32 32x32x40 takes 4 KB for it and 11.1 KB a stage, so two stages do not fit 24 KB.
  const GpuTarget m5 = apple_gpu_target(10, true);
  gpu::Function t = lower_to_gpu(allowing_tf32(kernels::gemm(kernels::gemm_config(DType::f32, 32, 32, 40, true))), m5, metal());
  const std::string tt = gpu::print(t);
  EXPECT_EQ(count(tt, "atom=\"tensor_ops\""), 1) << tt;
  EXPECT_EQ(count(tt, "_next"), 0) << tt;
  EXPECT_EQ(gpu::threadgroup_bytes(t), 32u * 32 * 4 + stage_bytes(32, 32, 40, DType::f32));
  gpu::Function t2 = lower_to_gpu(allowing_tf32(kernels::gemm(kernels::gemm_config(DType::f32, 32, 32, 32, true))), m5, metal());
  EXPECT_EQ(gpu::threadgroup_bytes(t2), 32u * 32 * 4 + 2 * stage_bytes(32, 32, 32, DType::f32));
  // bf16 on an M1-class GPU (simdgroup_matrix without bfloat): operands converted to f32 in
  // registers, staged by the single-buffer loop.
  EXPECT_EQ(count(gpu::print(lower(kernels::gemm_config(DType::bf16, 64, 64, 32, true), metal())), "_next"), 0);
}

TEST(DoubleBuffer, CudaKeepsItsAsynchronousPipeline) {
  LowerOptions o = metal();
  o.device = "cuda";
  o.warpgroup = false;
  const std::string text = gpu::print(lower(kernels::gemm_config(DType::f16, 64, 64, 32, true), o,
                                            nvidia_gpu_target("sm_80")));
  EXPECT_EQ(count(text, "async_wait pending=1"), 1) << text;
  EXPECT_EQ(count(text, "_next"), 0) << text;
}

using kernels::KernelBuilder;
using kernels::V;

// The GEMM with its accumulator also stored inside the K loop: a body that writes memory.
Program gemm_storing_in_the_loop() {
  KernelBuilder k("gemm_storing");
  V a = k.ptr("A", DType::f16), b = k.ptr("B", DType::f16), c = k.ptr("C");
  V n = k.scalar("N"), kk = k.scalar("K");
  V row = k.program_id(0) * 64, col = k.program_id(1) * 64;
  V acc = k.tile_range(k.i32(0), kk, k.i32(32), {k.zeros(Shape::of(64, 64))},
                       [&](V kv, std::vector<V> carried) -> std::vector<V> {
                         V d = k.dot(k.tile_load(a, row, kv, kk, Shape::of(64, 32)),
                                     k.tile_load(b, kv, col, n, Shape::of(32, 64)), carried[0]);
                         k.tile_store(c, row, col, n, d);
                         return {d};
                       })[0];
  k.tile_store(c, row, col, n, acc);
  return k.finish();
}

TEST(DoubleBuffer, ALoopThatWritesMemoryKeepsItsLoadsInOrderOnEveryTarget) {
  // Prefetching (registers on Metal, cp.async stages on CUDA) reads the next iterations' tiles
  // before this iteration's stores, which may write them: neither target pipelines such a loop.
  const Program p = gemm_storing_in_the_loop();
  const std::string msl = gpu::print(lower_to_gpu(p, apple_gpu_target(), metal()));
  EXPECT_EQ(count(msl, "_next"), 0) << msl;
  LowerOptions o = metal();
  o.device = "cuda";
  o.warpgroup = false;
  const std::string cuda = gpu::print(lower_to_gpu(p, nvidia_gpu_target("sm_80"), o));
  EXPECT_EQ(count(cuda, "async_wait pending=1"), 0) << cuda;
  EXPECT_EQ(count(cuda, "next_stage"), 0) << cuda;
}

}  // namespace
}  // namespace metile
