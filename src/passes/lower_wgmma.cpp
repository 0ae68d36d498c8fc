// dot on Hopper's warpgroup matrix units (wgmma.mma_async, sm_90a; GpuTarget::warpgroup_atoms).
//
// A dot takes a warpgroup atom when both operands are copied straight from tile_loads
// (assign_layouts' direct copies, so the copies are async_copy ops and a K loop may pipeline them), K is
// staged whole, the operand dtype has an atom (f16, bf16; tf32: lower_wgmma_tf32.cpp) and the threadgroup's warpgroups
// (threads / 128) tile the accumulator: wg_m x wg_n warpgroups, each 64 * rm rows (rm m64
// instructions per k step) and nw = N / wg_n columns (a multiple of 8 up to 256). wg_n > 1 only
// when the columns of a warpgroup start a swizzle block of B and nothing reduces the rows
// across warps. Everything else keeps the warp-level atoms of lower_dot.cpp.
//
// Operands: A (M x K) and B (K x N) stay row-major as loaded (A K-major, B N-major: wgmma's
// transposed-B form) in the swizzled blocks of src/target/wgmma_layout.h, written chunk by
// chunk by the same async copies as the warp-level path, only to swizzled offsets, unpadded.
// The arrays are the first in threadgroup memory and each stage is whole 1024-byte blocks, so
// every block sits where the hardware's swizzle (on absolute address bits) expects it.
// wgmma reads threadgroup memory through the async proxy: after the copies are waited for,
// each thread fences (proxy_fence) before the barrier that publishes them.
//
// The accumulator stays in registers in wgmma's fragment: warp q of a warpgroup holds rows
// 16q..16q+15 of each m64 block, a thread the m16n8 `c` fragment of each 8-column piece;
// registers run over the fragment, then the pieces, then the m64 blocks (the instruction's
// register order, one instruction per block), so the epilogue and tile_store use it as any
// other tile layout.
#include <algorithm>

#include "passes/lower_internal.h"
#include "passes/wgmma_fp8.h"
#include "passes/wgmma_tf32.h"

namespace metile::lowering {

namespace {

// The accumulator layout above as a tile layout of the m x n tile (element row * n + col).
auto wgmma_fragment(const MatrixAtom& a, int64_t m, int64_t n, int64_t wg_m, int64_t wg_n) {
  constexpr int64_t kRows = 16;  // rows of the c fragment: one warp's share of an m64 block
  auto to_tile = [&](int64_t s) { return (s % kRows) * n + s / kRows; };
  const int64_t rows = m / wg_m, nw = n / wg_n;
  std::vector<IntTuple> ts, td, rs, rd;
  append_atom_mode(a.c.mode(0), to_tile, ts, td);
  ts.emplace_back(int64_t{4});  // the warps of a warpgroup
  td.emplace_back(kRows * n);
  ts.emplace_back(wg_m);
  td.emplace_back(rows * n);
  ts.emplace_back(wg_n);
  td.emplace_back(nw);
  append_atom_mode(a.c.mode(1), to_tile, rs, rd);
  rs.emplace_back(nw / 8);  // 8-column pieces
  rd.emplace_back(int64_t{8});
  rs.emplace_back(rows / 64);  // m64 blocks
  rd.emplace_back(64 * n);
  return gpu::tile_layout(m * n, make_layout(IntTuple(ts), IntTuple(td)), make_layout(IntTuple(rs), IntTuple(rd)));
}

}  // namespace

}  // namespace metile::lowering

namespace metile {

bool choose_wgmma(const Program& p, const Op& o, const GpuTarget& target, const LowerOptions& options,
                  bool rows_reduced, gpu::Function& f, DotChoice& plan) {
  if (!options.wgmma || target.warpgroup_atoms.empty() || f.threads % 128 != 0) return false;
  const int64_t groups = f.threads / 128;
  const int64_t m = p.type(o.operands[0]).shape.dims[0], k = p.type(o.operands[0]).shape.dims[1];
  const int64_t n = p.type(o.operands[1]).shape.dims[1];
  // FP8 (lower_wgmma_fp8.cpp): both operands copied K-major from their tile_loads, whose FP8
  // dtypes replace the f16 staging planned for the warp-level atom.
  const bool fp8 = is_f8(p.type(o.operands[0]).dtype);
  DotChoice fp8_plan = plan;
  if (fp8 && !wgmma_fp8_copies(p, o, target, options, fp8_plan)) return false;
  const DotChoice& in = fp8 ? fp8_plan : plan;
  if (in.atom == nullptr || in.direct[0] == nullptr || in.kc != k) return false;
  if (in.b_kmajor) return false;  // B copied n rows of k for mma.sync (lower_trans_operand.cpp)
  // 3xTF32 would need each operand's residual staged beside it; mma.sync splits in registers.
  if (in.tf32x3) return false;
  // tf32 (lower_wgmma_tf32.cpp) and FP8: B K-major, copied from the N x K tile_load its trans reads.
  const Op* kmajor_b = in.stage == DType::f32 ? wgmma_kmajor_b(p, o, options) : fp8 ? in.direct[1] : nullptr;
  if (plan.stage == DType::f32 && kmajor_b == nullptr)  // B N-major: C^T = B^T A^T, B^T in registers
    return plan.direct[1] != nullptr && choose_wgmma_transposed(p, o, target, rows_reduced, f, plan);
  if (plan.stage != DType::f32 && in.direct[1] == nullptr) return false;
  const MatrixAtom* atom = nullptr;
  for (const MatrixAtom& a : target.warpgroup_atoms)
    if (atom == nullptr && a.ab == in.stage && a.acc == p.type(o.result()).dtype && k % a.k == 0) atom = &a;
  if (atom == nullptr) return false;
  const int64_t elem = static_cast<int64_t>(dtype_size(in.stage));
  const WgmmaTile ta = wgmma_tile(m, k, elem), tb = wgmma_b_tile(k, n, elem);
  // Whole 1024-byte blocks per stage keep every swizzle block of every stage aligned.
  if (ta.swizzle == 0 || tb.swizzle == 0 || (m * k * elem) % 1024 != 0 || (k * n * elem) % 1024 != 0) return false;
  int64_t wg_m = 0, wg_n = 0;
  for (int64_t wn = 1; wn <= groups && wg_m == 0; ++wn) {
    const int64_t wm = groups / wn;
    if (groups % wn != 0 || m % (64 * wm) != 0 || n % wn != 0) continue;
    const int64_t nw = n / wn;
    if (nw % atom->n != 0 || nw > 256) continue;
    if (wn > 1 && ((kmajor_b == nullptr && nw % tb.width() != 0) || rows_reduced)) continue;
    wg_m = wm;
    wg_n = wn;
  }
  if (wg_m == 0) return false;
  if (fp8) plan = fp8_plan;
  plan.atom = atom;
  plan.wgmma = true;
  if (kmajor_b != nullptr) plan.direct[1] = kmajor_b;  // tf32: the trans is not lowered
  plan.warps_m = static_cast<int>(4 * wg_m);
  plan.warps_n = static_cast<int>(wg_n);
  plan.acc = f.add_layout(lowering::wgmma_fragment(*atom, m, n, wg_m, wg_n));
  plan.staged[0] = ta;
  plan.staged[1] = tb;
  return true;
}

}  // namespace metile

namespace metile::lowering {

ValueId Lowering::staging_offset(const Op& load, ValueId r, ValueId c, int64_t ld) {
  auto it = wgmma_staging.find(&load);
  if (it == wgmma_staging.end()) return b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {r, c_i32(ld)}), c});
  const WgmmaTile& t = it->second;
  const int64_t w = t.width(), v = t.chunk();
  auto op = [&](OpKind k, ValueId x, int64_t y) { return b.ew(k, {x, c_i32(y)}); };
  ValueId block = op(OpKind::MUL, op(OpKind::DIV, c, w), t.rows * w);
  ValueId chunk = op(OpKind::DIV, op(OpKind::MOD, c, w), v);
  ValueId phase = op(OpKind::MOD, op(OpKind::DIV, r, 128 / t.swizzle), t.swizzle / 16);
  ValueId swizzled = op(OpKind::MUL, b.ew(OpKind::BITXOR, {chunk, phase}), v);
  return b.ew(OpKind::ADD, {b.ew(OpKind::ADD, {block, op(OpKind::MUL, r, w)}), swizzled});
}

void Lowering::wgmma_sync_for(const std::vector<const Op*>& dots) {
  for (const Op* d : dots)
    if (dot_plans.at(d).wgmma) {
      gpu::Op g;
      g.kind = gpu::GpuOpKind::WGMMA_SYNC;
      b.append(std::move(g));
      return;
    }
}

}  // namespace metile::lowering
