// f16 / bf16 flash attention on Hopper's warpgroup atom (dot_choices.cpp): the scores
// dot(q, trans(k)) read K^T K-major (transpose flag 0) with Q staged swizzled before the loop,
// and the output dot(p, v, acc) takes P from registers, in the scores' accumulator fragments
// (wgmma's register-A form). GPU IR and CUDA text, the fragment map the emitter relies on, and
// NVRTC compiles for sm_90a (no GPU needed). On an H100, test_attention.py checks the results
// against float64 on every device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "target/gpu_target.h"
#include "target/options.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// examples/python/flash_attention.py's forward kernel (non-causal) as its tracer writes it:
// BLOCK_M 128 query rows, BLOCK_N keys a step, head_dim d, 256 threads, columns past seq masked.
std::string flash(const std::string& t, int block_n, int d) {
  const std::string n = std::to_string(block_n), hd = std::to_string(d);
  const std::string s = "tile<128x" + n + "xf32>";
  return R"(kernel @flash(%Q: ptr<)" + t + R"(>, %K: ptr<)" + t + R"(>, %V: ptr<)" + t + R"(>, %O: ptr<)" + t +
         R"(>, %L: ptr<f32>, %seq: i32, %scale: f32) num_threads(256) {
  %c0 = const {value = 0} : i32
  %cn = const {value = )" + n + R"(} : i32
  %cd = const {value = )" + hd + R"(} : i32
  %c128 = const {value = 128} : i32
  %pid = program_id {axis = 0} : i32
  %start = mul %pid, %c128 : i32
  %bh = program_id {axis = 1} : i32
  %sd = mul %seq, %cd : i32
  %base = mul %bh, %sd : i32
  %Qb = ptr_offset %Q, %base : ptr<)" + t + R"(>
  %Kb = ptr_offset %K, %base : ptr<)" + t + R"(>
  %Vb = ptr_offset %V, %base : ptr<)" + t + R"(>
  %Ob = ptr_offset %O, %base : ptr<)" + t + R"(>
  %rows = arange %start {size = 128} : tile<128xi32>
  %q = tile_load %Qb, %start, %c0, %cd, %seq, %cd : tile<128x)" + hd + "x" + t + R"(>
  %ninf = const {value = -inf} : f32
  %z = const {value = 0.0} : f32
  %m0 = broadcast %ninf : tile<128xf32>
  %l0 = broadcast %z : tile<128xf32>
  %acc0 = broadcast %z : tile<128x)" + hd + R"(xf32>
  %acc, %l, %m = for %i = %c0 to %seq step %cn iter_args(%a = %acc0, %li = %l0, %mi = %m0) -> (tile<128x)" + hd +
         R"(xf32>, tile<128xf32>, tile<128xf32>) {
    %k = tile_load %Kb, %i, %c0, %cd, %seq, %cd : tile<)" + n + "x" + hd + "x" + t + R"(>
    %v = tile_load %Vb, %i, %c0, %cd, %seq, %cd : tile<)" + n + "x" + hd + "x" + t + R"(>
    %kt = trans %k : tile<)" + hd + "x" + n + "x" + t + R"(>
    %s0 = broadcast %z : )" + s + R"(
    %s = dot %q, %kt, %s0 : )" + s + R"(
    %cols = arange %i {size = )" + n + R"(} : tile<)" + n + R"(xi32>
    %cr = reshape %cols : tile<1x)" + n + R"(xi32>
    %cb = broadcast %cr : tile<128x)" + n + R"(xi32>
    %keep = lt %cb, %seq : tile<128x)" + n + R"(xbool>
    %ninfb = broadcast %ninf : )" + s + R"(
    %sm = select %keep, %s, %ninfb : )" + s + R"(
    %rmax = reduce_max %sm {axis = 1} : tile<128xf32>
    %rsc = mul %rmax, %scale : tile<128xf32>
    %mn = maximum %mi, %rsc : tile<128xf32>
    %dm = sub %mi, %mn : tile<128xf32>
    %alpha = exp2 %dm : tile<128xf32>
    %ss = mul %sm, %scale : )" + s + R"(
    %mc = reshape %mn : tile<128x1xf32>
    %mb = broadcast %mc : )" + s + R"(
    %sx = sub %ss, %mb : )" + s + R"(
    %p = exp2 %sx : )" + s + R"(
    %ls = mul %li, %alpha : tile<128xf32>
    %rs = reduce_sum %p {axis = 1} : tile<128xf32>
    %ln = add %ls, %rs : tile<128xf32>
    %ph = cast %p : tile<128x)" + n + "x" + t + R"(>
    %ac = reshape %alpha : tile<128x1xf32>
    %ab = broadcast %ac : tile<128x)" + hd + R"(xf32>
    %as = mul %a, %ab : tile<128x)" + hd + R"(xf32>
    %an = dot %ph, %v, %as : tile<128x)" + hd + R"(xf32>
    yield %an, %ln, %mn
  }
  %lc = reshape %l : tile<128x1xf32>
  %lb = broadcast %lc : tile<128x)" + hd + R"(xf32>
  %out = div %acc, %lb : tile<128x)" + hd + R"(xf32>
  %oh = cast %out : tile<128x)" + hd + "x" + t + R"(>
  tile_store %Ob, %start, %c0, %cd, %oh, %seq, %cd
  %ll = log2 %l : tile<128xf32>
  %lse = add %m, %ll : tile<128xf32>
  %Lb = mul %bh, %seq : i32
  %Lp = ptr_offset %L, %Lb : ptr<f32>
  %lptr = ptr_offset %Lp, %rows : tile<128xptr<f32>>
  %in = lt %rows, %seq : tile<128xbool>
  store %lptr, %lse, %in
}
)";
}

// The kernel through the GPU pipeline for an H100 (sm_90), with the pieces named switched off.
gpu::Function compiled(const std::string& t, int block_n, int d, std::vector<std::string> off = {}) {
  CompileOptions o;
  o.disabled_passes = std::move(off);
  return run_gpu_pipeline(parse(flash(t, block_n, d)), nvidia_gpu_target("sm_90"), o, "cuda").function;
}

// The mma op with A in registers (register_a=1), nullptr if none.
const gpu::Op* register_a_mma(const gpu::Function& f) {
  const gpu::Op* found = nullptr;
  gpu::walk(f.body, [&](const gpu::Op& op) {
    if (op.kind == gpu::GpuOpKind::MMA && op.find_attr("register_a") != nullptr) found = &op;
  });
  return found;
}

// The op defining GPU IR value v (nullptr: a parameter or block argument).
const gpu::Op* def_of(const gpu::Function& f, ValueId v) {
  const gpu::Op* found = nullptr;
  gpu::walk(f.body, [&](const gpu::Op& op) {
    for (ValueId r : op.results)
      if (r == v) found = &op;
  });
  return found;
}

TEST(GpuWgmmaAttention, BothDotsTakeTheWarpgroupAtom) {
  for (const std::string t : {"f16", "bf16"}) {
    const gpu::Function f = compiled(t, 64, 128, {"tma"});  // the ring through async copies
    const std::string ir = gpu::print(f);
    EXPECT_EQ(count(ir, "atom=\"wgmma\""), 2) << ir;
    EXPECT_EQ(count(ir, "warps_m=8 warps_n=1"), 2) << "both over two warpgroups of 64 rows\n" << ir;
    EXPECT_EQ(count(ir, "b_kmajor=1"), 1) << "the scores' K^T\n" << ir;
    EXPECT_EQ(count(ir, "register_a=1"), 1) << "the output's P\n" << ir;
    const gpu::Op* mma = register_a_mma(f);
    ASSERT_NE(mma, nullptr) << ir;
    const gpu::Op* p = def_of(f, mma->operands[0]);
    EXPECT_TRUE(p != nullptr && p->kind != gpu::GpuOpKind::CONVERT_LAYOUT) << "P stays in the scores' fragments\n" << ir;
    EXPECT_EQ(count(ir, " = alloc "), 4) << "Q, K, V and the row statistics' scratch: P has no array\n" << ir;
    EXPECT_EQ(count(ir, "layout=\"swizzle128\""), 3) << ir;
    // K and V straight to their arrays: three stages fit at 64 keys, so the prologue copies two
    // iterations and the loop one.
    EXPECT_EQ(count(ir, " async_copy "), 6) << ir;
    const std::string cuda = emit_cuda(f).source;
    // Scores: 128 x 64 over two warpgroups, head_dim 128 in 8 k16 steps, B K-major (flag 0).
    EXPECT_EQ(count(cuda, "wgmma.mma_async.sync.aligned.m64n64k16.f32." + t + "." + t), 8) << cuda;
    EXPECT_EQ(count(cuda, ", p, 1, 1, 0, 0;"), 8) << cuda;
    EXPECT_EQ(count(cuda, "mt_wgmma_desc(mma_b + "), 8 + 4) << "8 steps of K^T, 4 of V\n" << cuda;
    // Output: 128 x 128, P's 64 columns in 4 k16 steps of four registers, V N-major (flag 1).
    EXPECT_EQ(count(cuda, "wgmma.mma_async.sync.aligned.m64n128k16.f32." + t + "." + t), 4) << cuda;
    EXPECT_EQ(count(cuda, ", p, 1, 1, 1;"), 4) << cuda;
    // Each register pair packs the 16-bit bits of P's values, not their f32 values cast to
    // integers (which made every P 0 or a denormal on an H100).
    EXPECT_EQ(count(cuda, "] = mt_pack(mt_f32_to_" + t + "("), 16) << cuda;
  }
}

// The emitter packs P's registers i * k/2 + 8x + 2h, +1 into a_h of m64 block i, k16 step x:
// the layout lowering hands it must put there the elements wgmma's A fragment names.
// Both dots hold one operand (Q staged before the loop, P in registers) and stream the other:
// the loop is pipelined with K and V in a two-stage ring (lower_pipeline.cpp).
// With TMA off (METILE_GPU_OFF=tma) the ring is filled by async copies.
TEST(GpuWgmmaAttention, KAndVStreamThroughATwoStageRing) {
  const std::string ir = gpu::print(compiled("f16", 128, 128, {"tma"}));
  EXPECT_EQ(count(ir, "shape=\"128x128\" stages=1"), 1) << "Q, staged once\n" << ir;
  EXPECT_EQ(count(ir, "shape=\"128x128\" stages=2"), 2) << "K and V\n" << ir;
  const size_t loop = ir.find(" for %");
  ASSERT_NE(loop, std::string::npos) << ir;
  const std::string before = ir.substr(0, loop), body = ir.substr(loop);
  EXPECT_EQ(count(before, " async_copy "), 2) << "the prologue copies iteration 0\n" << ir;
  EXPECT_EQ(count(before, "async_commit"), 1) << ir;
  // The top: the stage's copies waited for, fenced, a barrier, then the next iteration's copies,
  // which overlap the whole body; nothing waits for copies inside the body.
  const size_t wait = body.find("async_wait pending=0"), bar = body.find(" barrier"),
               copy = body.find(" async_copy "), mma = body.find(" = mma ");
  EXPECT_TRUE(wait < bar && bar < copy && copy < mma) << body;
  EXPECT_EQ(count(body, "async_wait"), 2) << "the top's and the one after the loop\n" << body;
  // The softmax reads S and the rescale reads O: neither mma stays in flight.
  EXPECT_EQ(count(ir, " wait=1"), 2) << ir;
  EXPECT_EQ(count(ir, " wait=0"), 0) << ir;
  // Switched off with the pipeline: the early copy of V (issue-copies-early), one stage each.
  const std::string off = gpu::print(compiled("f16", 128, 128, {"pipeline"}));
  EXPECT_EQ(count(off, "stages=2"), 0) << off;
  EXPECT_EQ(count(off, "async_wait pending=1"), 1) << off;
}

// On sm_90 TMA fills the ring (lower_tma.cpp): K and V are slabs of a 3-D tensor map (their base
// is K + bh * seq * head_dim), each stage's copies complete on its mbarrier, and every thread
// waits for the stage's phase after the top's barrier, before the next iteration's copies (as
// lowering writes it: release-stages, below, replaces that barrier).
TEST(GpuWgmmaAttention, KAndVRingStagesAreFilledByTma) {
  const gpu::Function f = compiled("f16", 128, 128, {"release-stages"});
  const std::string ir = gpu::print(f);
  const size_t loop = ir.find(" for %");
  ASSERT_NE(loop, std::string::npos) << ir;
  const std::string before = ir.substr(0, loop), body = ir.substr(loop);
  EXPECT_EQ(count(ir, " mbar_init "), 1) << ir;
  EXPECT_EQ(count(ir, "count=2 n=2"), 1) << "K and V arrive on each of two stages\n" << ir;
  EXPECT_EQ(count(before, " tma_load "), 2) << "the prologue copies iteration 0\n" << ir;
  EXPECT_EQ(count(ir, " async_copy "), 0) << "Q staged once through registers, K and V by TMA\n" << ir;
  EXPECT_EQ(count(ir, "slabs=1"), 2 * 2 * 2) << "spec and attribute of each of four copies\n" << ir;
  EXPECT_EQ(count(ir, "rows=p5 cols=128 ld=128 elem=2 box=128x64 swizzle=128 clamp=0 slabs=1"), 4) << ir;
  // The top keeps the ring's barrier structure: its waits, the barrier, then the stage's mbarrier
  // phase, then the next iteration's copies, all ahead of the mmas, which end waited for.
  const size_t wait = body.find("async_wait pending=0"), bar = body.find(" barrier"),
               phase = body.find(" mbar_wait "), copy = body.find(" tma_load "), mma = body.find(" = mma ");
  EXPECT_TRUE(wait < bar && bar < phase && phase < copy && copy < mma) << body;
  EXPECT_EQ(count(body, " mbar_wait "), 1) << body;
  EXPECT_EQ(count(body, " tma_load "), 2) << body;
  EXPECT_EQ(count(ir, " wait=1"), 2) << ir;
  EXPECT_EQ(count(ir, "warpgroup_wait"), 0) << "no MMA group stays in flight\n" << ir;
  // In CUDA: each copy two 128 x 64 boxes (128 head_dim columns of f16, a 128-byte swizzle each) at
  // (column, row, slab), the slab the program's (batch, head).
  const std::string cuda = emit_cuda(f).source;
  EXPECT_EQ(count(cuda, "mt_tma_load_3d("), 1 + 2 * 2 * 2) << "the helper and 4 copies of 2 boxes\n" << cuda;
  EXPECT_EQ(count(cuda, "mt_tma_load_2d("), 1) << "the prelude's helper only\n" << cuda;
  EXPECT_EQ(count(cuda, "mt_mbar_expect_tx("), 1 + 4) << cuda;
  // Switched off: today's async copies, no barrier objects.
  const std::string off = gpu::print(compiled("f16", 128, 128, {"tma"}));
  EXPECT_EQ(count(off, "tma_load"), 0) << off;
  EXPECT_EQ(count(off, "mbar_"), 0) << off;
}

// release-stages: the K/V ring's stages are released by per-stage mbarriers, so the loop has no
// barrier; Q, stored before the loop, is fenced and published by a barrier in front of it.
TEST(GpuWgmmaAttention, TheRingsStagesAreReleasedByMbarriers) {
  const std::string ir = gpu::print(compiled("f16", 128, 128));
  const size_t loop = ir.find(" for %");
  ASSERT_NE(loop, std::string::npos) << ir;
  const std::string before = ir.substr(0, loop), body = ir.substr(loop, ir.find("\n  }\n", loop) - loop);
  EXPECT_EQ(count(ir, " mbar_init "), 2) << ir;
  EXPECT_EQ(count(ir, " mbar_init %empty_bar, %tid count=8 n=2"), 1) << ir;
  EXPECT_EQ(count(body, " barrier"), 0) << body;
  EXPECT_EQ(before.substr(before.size() - std::string("  warpgroup_sync\n  barrier\n ").size()),
            "  warpgroup_sync\n  barrier\n ") << before;
  const size_t arrive = body.find(" mbar_arrive "), wait = body.find(" mbar_wait ", arrive),
               copy = body.find(" tma_load "), mma = body.find(" = mma ");
  EXPECT_TRUE(arrive < wait && wait < copy && copy < mma && mma != std::string::npos) << body;
  EXPECT_EQ(count(body, " mbar_wait "), 2) << body;
}

TEST(GpuWgmmaAttention, RegisterAIsWgmmasAFragment) {
  for (int block_n : {64, 128}) {
    const gpu::Function f = compiled("f16", block_n, 64);
    const gpu::Op* mma = register_a_mma(f);
    ASSERT_NE(mma, nullptr) << gpu::print(f);
    const gpu::Layout& l = f.layout(f.value(mma->operands[0]).layout);
    const int64_t k = block_n, rows = 64;  // two warpgroups of one m64 block each
    ASSERT_EQ(l.regs(), k / 2) << l.str();
    int bad = 0;
    for (int64_t tid = 0; tid < 256; ++tid) {
      const int64_t wg = tid / 128, q = tid % 128 / 32, g = tid % 32 / 4, t = tid % 4;
      for (int64_t x = 0; x < k / 16; ++x)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t e = 0; e < 2; ++e) {
            const int64_t row = wg * rows + 16 * q + g + (h % 2) * 8, col = 16 * x + (h / 2) * 8 + 2 * t + e;
            bad += l.element(tid, 8 * x + 2 * h + e) != row * k + col;
          }
    }
    EXPECT_EQ(bad, 0) << l.str();
  }
}

TEST(GpuWgmmaAttention, EachFormIsSwitchedOffByName) {
  // warpgroup_register_a off: P would be staged, which keeps the output dot on mma.sync.
  const std::string staged = gpu::print(compiled("f16", 64, 64, {"warpgroup_register_a"}));
  EXPECT_EQ(count(staged, "atom=\"wgmma\""), 1) << staged;
  EXPECT_EQ(count(staged, "atom=\"mma.sync\""), 1) << staged;
  EXPECT_EQ(count(staged, "register_a"), 0) << staged;
  // warpgroup_kmajor_b off: the scores keep mma.sync's K-major B, and so P is no wgmma fragment.
  const std::string sync = gpu::print(compiled("f16", 64, 64, {"warpgroup_kmajor_b"}));
  EXPECT_EQ(count(sync, "atom=\"wgmma\""), 0) << sync;
  EXPECT_EQ(count(sync, "b_kmajor=1"), 1) << sync;
  // The pieces' earlier names (kPassAliases) still switch the same forms off.
  EXPECT_EQ(gpu::print(compiled("f16", 64, 64, {"wgmma_register_a"})), staged);
  EXPECT_EQ(gpu::print(compiled("f16", 64, 64, {"wgmma_kmajor_b"})), sync);
}

TEST(GpuWgmmaAttention, CompilesThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  struct V {
    const char* t;
    int block_n, d;
  };
  // Each dtype, BLOCK_N and head_dim twice.
  for (const V& v : {V{"f16", 64, 64}, V{"bf16", 64, 128}, V{"f16", 128, 128}, V{"bf16", 128, 64}}) {
    const CudaKernelSource s = emit_cuda(compiled(v.t, v.block_n, v.d));
    ASSERT_EQ(count(s.source, "wgmma.mma_async"), v.d / 16 + v.block_n / 16) << v.t << " " << v.block_n << " " << v.d;
    ASSERT_EQ(count(s.source, "mbarrier.arrive.shared::cta.b64"), 1) << "release-stages\n" << s.source;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log))
        << v.t << " " << v.block_n << " " << v.d << "\n" << log;
  }
}

}  // namespace
}  // namespace metile
