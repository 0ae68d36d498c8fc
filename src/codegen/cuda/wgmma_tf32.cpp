// One transposed tf32 wgmma `mma` op (src/passes/dot_choices.cpp plans it): C^T = B^T A^T.
// Warpgroup g = tid / 128 computes wgmma rows [rows (g % wg_m), +rows) (C's columns) and columns
// [nw (g / wg_m), +nw) (C's rows) with warps_m = 4 wg_m, warps_n = wg_n. Per k step of 8 and m64
// block i, each thread first reads its four elements of B^T's 64 x 8 block from B's K x N array
// (the N-major swizzled blocks of src/target/swizzled_tile.h): wgmma row r is B's column, and the
// register fragment is mma.sync m16n8k8's A fragment per warp (a0 = (g, t), a1 = (g + 8, t),
// a2 = (g, t + 4), a3 = (g + 8, t + 4), g = lane / 4, t = lane % 4, warp q taking rows 16q..),
// rounded to tf32 with cvt.rna; then (per k step, so the next step's reads overlap this step's
// wgmmas) a fence and
//   wgmma.mma_async.sync.aligned.m64n<nw>k8.f32.tf32.tf32 {acc[i * nw/2 ...]}, {a0..a3}, descB, p, 1, 1
// with descB over A's M x K array (K-major: leading offset unused, 8-row groups 8 * swizzle bytes
// apart, the k step moving the start address inside the swizzle row; the warpgroup's nw rows).
// The fragment registers must not change while the wgmmas read them, so the op waits for its
// group before it ends, pipelined or not.
#include "codegen/cuda/wgmma_tf32.h"

#include "codegen/cuda/wgmma.h"
#include "support/error.h"
#include "target/swizzled_tile.h"

namespace metile {

void emit_cuda_wgmma_transposed(SourceWriter& w, const MmaSpec& s) {
  METILE_ASSERT(s.ab == DType::f32, "the transposed wgmma takes tf32 operands");
  const int64_t wg_m = s.warps_m / 4, wg_n = s.warps_n;
  METILE_ASSERT(wg_m >= 1 && s.warps_m % 4 == 0 && s.n % (64 * wg_m) == 0 && s.m % wg_n == 0 && s.k % 8 == 0,
                "transposed wgmma: warps do not make whole warpgroups over the tile");
  const int64_t rows = s.n / wg_m, nw = s.m / wg_n, blocks = rows / 64, steps = s.k / 8;
  const SwizzledTile ta = swizzled_tile(s.m, s.k, 4), tb = swizzled_tile(s.k, s.n, 4);
  METILE_ASSERT(ta.swizzle != 0 && tb.swizzle != 0, "transposed wgmma: operand rows fit no swizzle");
  const std::string hex = wgmma_descriptor_high(1, 8 * ta.swizzle / 16, ta.descriptor_mode());
  const std::string W = std::to_string(tb.width());
  w.line("const int mma_wg = " + s.tid + " >> 7;");
  w.line("const uint mma_b = mt_smem_addr(" + s.a + ") + (mma_wg / " + std::to_string(wg_m) + ") * " +
         std::to_string(nw * ta.swizzle) + ";");
  w.line("const int mma_n = (mma_wg % " + std::to_string(wg_m) + ") * " + std::to_string(rows) + " + ((" + s.tid +
         " >> 5) & 3) * 16 + ((" + s.tid + " & 31) >> 2);");
  w.line("const int mma_k = " + s.tid + " & 3;");
  w.line("const float* mma_bs = (const float*)(" + s.b + ");");
  // Element (k, n) of B's array: column block n / W (K * W elements each), row k of W elements,
  // its 4-element chunk swizzled by the row's phase.
  w.line("auto mma_at = [&](int k, int n) { return mma_bs[(n / " + W + ") * " + std::to_string(s.k * tb.width()) +
         " + k * " + W + " + ((((n % " + W + ") >> 2) ^ ((k / " + std::to_string(128 / tb.swizzle) + ") % " +
         std::to_string(tb.swizzle / 16) + ")) << 2) + (n & 3)]; };");
  w.line("uint mma_f[" + std::to_string(steps * blocks * 4) + "];");
  const int64_t regs = nw / 2;  // f32 accumulators per thread per m64 block
  std::string list;
  for (int64_t r = 0; r < regs; ++r) list += (r ? ", %" : "%") + std::to_string(r);
  const std::string frag = "{%" + std::to_string(regs) + ", %" + std::to_string(regs + 1) + ", %" +
                           std::to_string(regs + 2) + ", %" + std::to_string(regs + 3) + "}";
  const std::string body = "\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 5) +
                           ", 0;\\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(nw) +
                           "k8.f32.tf32.tf32 {" + list + "}, " + frag + ", %" + std::to_string(regs + 4) +
                           ", p, 1, 1;\\n}\\n\"";
  // Step by step: the fragments of step x + 1 are read while step x's wgmmas run (each step's
  // registers are its own; the fence orders their writes before the wgmmas that read them).
  for (int64_t x = 0; x < steps; ++x) {
    for (int64_t i = 0; i < blocks; ++i)
      for (int64_t h = 0; h < 4; ++h) {
        const std::string k = "mma_k + " + std::to_string(8 * x + (h >= 2 ? 4 : 0));
        const std::string n = "mma_n + " + std::to_string(64 * i + (h & 1 ? 8 : 0));
        w.line("mma_f[" + std::to_string((x * blocks + i) * 4 + h) + "] = mt_tf32(mma_at(" + k + ", " + n + "));");
      }
    w.line("mt_wgmma_fence();");
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t kk = 8 * x;
      const int64_t b_off = (kk / ta.width()) * ta.block_bytes() + (kk % ta.width()) * 4;
      w.open("");
      w.line("const ullong mma_db = mt_wgmma_desc(mma_b + " + std::to_string(b_off) + ", " + hex + ");");
      w.line("asm volatile(" + body);
      w.line("    : " + wgmma_accumulator_outputs(s.acc, i, regs));
      std::string ins;
      for (int64_t h = 0; h < 4; ++h) ins += "\"r\"(mma_f[" + std::to_string((x * blocks + i) * 4 + h) + "]), ";
      w.line("    : " + ins + "\"l\"(mma_db), \"r\"(1));");
      w.close();
    }
  }
  wgmma_commit_and_wait(w, s.acc, blocks * regs);
}

}  // namespace metile
