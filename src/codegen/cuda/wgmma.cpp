// One `mma` op on the warpgroup atom (lower_warpgroup.cpp plans it). Warpgroup g = tid / 128 works
// on rows [64 rm (g % wg_m), +64 rm) and columns [nw (g / wg_m), +nw) of the m x n accumulator
// (warps_m = 4 wg_m, warps_n = wg_n). Per k step of 16 and m64 block i it issues
//   wgmma.mma_async.sync.aligned.m64n<nw>k16.f32.<t>.<t> {acc[i * nw/2 ...]}, descA, descB, 1, 1, 1, 0, 1
// (scale-d on, A K-major, B N-major: the transposed-B form) with descriptors of the swizzled
// arrays (swizzled_tile.h): A's rows of one block `swizzle` bytes apart, 8-row groups 8 * swizzle
// apart (leading offset unused for K-major swizzled layouts, 1 by convention); B's k rows
// `swizzle` bytes apart, 8-row groups 8 * swizzle apart (stride offset) and column blocks one
// block apart (leading offset). A k step inside a 128-byte row moves the start address by its
// bytes: the swizzle applies to address bits the offset leaves alone.
//
// tf32 and FP8 read B K-major as A (no transpose immediates; k8 and k32 steps: 32 bytes of a row
// each); so does a 16-bit B staged K-major (b_kmajor: attention's K^T), with transpose flag 0.
// A 16-bit A may come from registers instead (a_regs: attention's P, dot_choices.cpp): per m64
// block and k16 step four .b32 registers, each two 16-bit values packed, in
//   wgmma.mma_async.sync.aligned.m64n<nw>k16.f32.<t>.<t> {acc..}, {a0, a1, a2, a3}, descB, p, 1, 1, tnspB
// and the op waits for its group before it ends, pipelined or not, since the registers are
// the compiler's to reuse once the asm statement has read them.
//
// FP8 with promotion (dot_choices.cpp) issues each `promote`-element run of k steps into a
// fresh register tile mma_p (scale-d 0 on its first step), waits for it and adds it into the
// accumulator, so the op ends waited for, pipelined or not.
//
// All of one op's instructions form one group. In a pipelined K loop it stays in flight while the
// thread issues the next copies; the warpgroup_sync before the next barrier (and after the loop)
// waits for it, so no stage is overwritten while a wgmma reads it. Elsewhere the op waits
// itself, and empty asm statements that read and write every accumulator register keep the
// compiler from moving their uses across the wait.
#include "codegen/cuda/wgmma.h"
#include "codegen/cuda/wgmma_tf32.h"

#include "target/swizzled_tile.h"
#include "support/error.h"

namespace metile {

std::string wgmma_descriptor_high(int64_t leading, int64_t stride, int64_t mode) {
  uint64_t v = (static_cast<uint64_t>(leading & 0x3FFF) << 16) | (static_cast<uint64_t>(stride & 0x3FFF) << 32) |
               (static_cast<uint64_t>(mode) << 62);
  static const char* digits = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), digits[v & 15]);
    v >>= 4;
  } while (v != 0);
  return "0x" + s + "ull";
}

std::string wgmma_accumulator_outputs(const std::string& acc, int64_t block, int64_t regs) {
  std::string outs;
  for (int64_t r = 0; r < regs; ++r)
    outs += std::string(r ? ", " : "") + "\"+f\"(" + acc + "[" + std::to_string(block * regs + r) + "])";
  return outs;
}

void wgmma_commit_and_wait(SourceWriter& w, const std::string& acc, int64_t regs) {
  w.line("mt_wgmma_commit();");
  w.line("mt_wgmma_wait_all();");
  w.line("#pragma unroll");
  w.line("for (int mma_r = 0; mma_r < " + std::to_string(regs) + "; ++mma_r) asm volatile(\"\" : \"+f\"(" + acc +
         "[mma_r]) :: \"memory\");");
}

namespace {

// The instruction's name for an operand type.
std::string wgmma_type(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "tf32";
    case DType::f8e4m3: return "e4m3";
    case DType::f8e5m2: return "e5m2";
    default: METILE_ASSERT(false, "wgmma takes f16, bf16, tf32 or FP8 operands"); return "";
  }
}

}  // namespace

void emit_cuda_wgmma(SourceWriter& w, const MmaSpec& s) {
  if (s.transposed) return emit_cuda_wgmma_transposed(w, s);  // tf32, B N-major (wgmma_tf32.cpp)
  const int64_t elem = static_cast<int64_t>(dtype_size(s.ab));
  const DType bt = s.bt == DType::invalid ? s.ab : s.bt;
  METILE_ASSERT(dtype_size(bt) == dtype_size(s.ab) && (bt == s.ab || is_f8(bt)), "wgmma: A and B types do not pair");
  const int64_t wg_m = s.warps_m / 4, wg_n = s.warps_n;
  METILE_ASSERT(wg_m >= 1 && s.warps_m % 4 == 0 && s.m % (64 * wg_m) == 0 && s.n % wg_n == 0,
                "wgmma: warps do not make whole warpgroups over the tile");
  const int64_t rows = s.m / wg_m, nw = s.n / wg_n, blocks = rows / 64;
  // B K-major, read as A is: tf32 and FP8 always (no transpose immediates), 16-bit
  // trans(tile_load) where the plan says so (transpose flag 0; dot_choices.cpp).
  const bool kmajor_b = warpgroup_b_kmajor(elem) || s.b_kmajor;
  const bool reg_a = !s.a_regs.empty();  // A's fragments from registers (dot_choices.cpp)
  const SwizzledTile ta = swizzled_tile(s.m, s.k, elem), tb = swizzled_b_tile(s.k, s.n, elem, kmajor_b);
  METILE_ASSERT((reg_a || ta.swizzle != 0) && tb.swizzle != 0, "wgmma: operand rows fit no swizzle");
  METILE_ASSERT(!reg_a || (elem == 2 && wg_n == 1 && s.promote == 0 && static_cast<int64_t>(s.a_regs.size()) == blocks * s.k / 2),
                "wgmma: register A takes 16-bit fragments of the rows' m x k accumulator");
  const std::string hi_a = wgmma_descriptor_high(1, 8 * ta.swizzle / 16, ta.descriptor_mode());
  const std::string hi_b = wgmma_descriptor_high(kmajor_b ? 1 : tb.block_bytes() / 16, 8 * tb.swizzle / 16, tb.descriptor_mode());
  w.line("const int mma_wg = " + s.tid + " >> 7;");
  if (!reg_a)
    w.line("const uint mma_a = mt_smem_addr(" + s.a + ") + (mma_wg % " + std::to_string(wg_m) + ") * " +
           std::to_string(rows * ta.swizzle) + ";");
  w.line("const uint mma_b = mt_smem_addr(" + s.b + ") + (mma_wg / " + std::to_string(wg_m) + ") * " +
         std::to_string(kmajor_b ? nw * tb.swizzle : nw / tb.width() * tb.block_bytes()) + ";");
  const int64_t regs = nw / 2;  // f32 accumulators per thread per m64 block
  const int64_t step = 32 / elem;  // k per instruction: 32 bytes of a row (k16 f16/bf16, k8 tf32, k32 FP8)
  if (reg_a) {
    // Register A, per m64 block i and k16 step x: a0 = (g, 2t | 2t+1), a1 = (g+8, 2t | 2t+1),
    // a2 = (g, 2t+8 | 2t+9), a3 = (g+8, 2t+8 | 2t+9) of the step's 16 columns, which are the
    // c fragments (4 registers each) of the accumulator's 8-column pieces 2x and 2x + 1, in the
    // m x k fragment order (blocks of k / 2 registers). The lower column is the low half.
    w.line("uint mma_f[" + std::to_string(blocks * s.k / 16 * 4) + "];");
    for (int64_t i = 0; i < blocks; ++i)
      for (int64_t x = 0; x < s.k / 16; ++x)
        for (int64_t h = 0; h < 4; ++h) {
          const size_t r = static_cast<size_t>(i * (s.k / 2) + x * 8 + 2 * h);
          w.line("mma_f[" + std::to_string((i * (s.k / 16) + x) * 4 + h) + "] = mt_pack(" + s.a_regs[r] + ", " +
                 s.a_regs[r + 1] + ");");
        }
  }
  w.line("mt_wgmma_fence();");
  std::string list;
  for (int64_t r = 0; r < regs; ++r) list += (r ? ", %" : "%") + std::to_string(r);
  const std::string instr = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(nw) + "k" + std::to_string(step) +
                            ".f32." + wgmma_type(s.ab) + "." + wgmma_type(bt);
  // Operands after the accumulators: A (a descriptor, or four fragment registers), B's
  // descriptor, scale-d; then the immediates scale-a, scale-b and the transpose flags (A's only
  // with a descriptor; none for tf32 and FP8).
  const int64_t after_a = regs + (reg_a ? 4 : 1);
  const std::string a_operand = reg_a ? "{%" + std::to_string(regs) + ", %" + std::to_string(regs + 1) + ", %" +
                                            std::to_string(regs + 2) + ", %" + std::to_string(regs + 3) + "}"
                                      : "%" + std::to_string(regs);
  const std::string tnsp_b = kmajor_b ? "0" : "1";
  const std::string immediates = warpgroup_b_kmajor(elem) ? ", p, 1, 1;" : reg_a ? ", p, 1, 1, " + tnsp_b + ";"
                                                                             : ", p, 1, 1, 0, " + tnsp_b + ";";
  const std::string body = "\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(after_a + 1) + ", 0;\\n" + instr +
                           " {" + list + "}, " + a_operand + ", %" + std::to_string(after_a) + immediates + "\\n}\\n\"";
  // FP8's two-level accumulation (dot_choices.cpp): every `promote` elements of K the wgmmas
  // start from zero (scale-d 0) in mma_p, and mma_p is added into the f32 accumulator.
  const int64_t promote = s.promote > 0 ? s.promote : s.k;
  METILE_ASSERT(s.k % promote == 0 && promote % step == 0, "wgmma: promotion interval does not divide K");
  const std::string into = s.promote > 0 ? "mma_p" : s.acc;
  if (s.promote > 0) w.line("float mma_p[" + std::to_string(blocks * regs) + "];");
  for (int64_t k0 = 0; k0 < s.k; k0 += promote) {
    if (k0 > 0) w.line("mt_wgmma_fence();");  // mma_p was read by the additions above
    for (int64_t kk = k0; kk < k0 + promote; kk += step)
      for (int64_t i = 0; i < blocks; ++i) {
        const int64_t a_off = reg_a ? 0 : (kk / ta.width()) * ta.block_bytes() + 64 * i * ta.swizzle + (kk % ta.width()) * elem;
        const int64_t b_off = kmajor_b ? (kk / tb.width()) * tb.block_bytes() + (kk % tb.width()) * elem : kk * tb.swizzle;
        w.open("");
        std::string a_in = "\"l\"(mma_da), ";
        if (reg_a) {
          a_in.clear();
          for (int64_t h = 0; h < 4; ++h) a_in += "\"r\"(mma_f[" + std::to_string((i * (s.k / 16) + kk / 16) * 4 + h) + "]), ";
        } else {
          w.line("const ullong mma_da = mt_wgmma_desc(mma_a + " + std::to_string(a_off) + ", " + hi_a + ");");
        }
        w.line("const ullong mma_db = mt_wgmma_desc(mma_b + " + std::to_string(b_off) + ", " + hi_b + ");");
        w.line("asm volatile(" + body);
        w.line("    : " + wgmma_accumulator_outputs(into, i, regs));
        const bool fresh = s.promote > 0 && kk == k0;  // scale-d 0: mma_p = A B
        w.line("    : " + a_in + "\"l\"(mma_db), \"r\"(" + (fresh ? "0" : "1") + "));");
        w.close();
      }
    if (s.promote == 0) continue;
    wgmma_commit_and_wait(w, "mma_p", blocks * regs);
    w.line("#pragma unroll");
    w.line("for (int mma_r = 0; mma_r < " + std::to_string(blocks * regs) + "; ++mma_r) " + s.acc +
           "[mma_r] += mma_p[mma_r];");
  }
  if (s.promote > 0) return;  // waited for above
  // A's fragment registers must not change while the wgmmas read them: the op waits, always.
  if (!s.wait && !reg_a) {  // a pipelined loop waits at its next barrier (warpgroup_sync)
    w.line("mt_wgmma_commit();");
    return;
  }
  wgmma_commit_and_wait(w, s.acc, blocks * regs);
}

}  // namespace metile
