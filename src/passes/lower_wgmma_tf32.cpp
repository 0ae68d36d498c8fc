// tf32 dots on Hopper's warpgroup atom (wgmma .tf32, sm_90a).
//
// wgmma has no transposed form for 32-bit operands: A and B must both be K-major in threadgroup
// memory. A (M x K, K contiguous) is; B of dot(a, b) is a K x N tile whose N is contiguous, so it
// is not. A dot takes the tf32 atom only where the program's B is already K-major in memory:
// dot(a, trans(t)) with t an N x K tile_load of the same block, read by that trans alone, the
// trans read by that dot alone, and nothing between the load and the dot writes memory (the
// rule of assign_layouts' direct copies). The dot then copies t itself (async copies or TMA)
// into the same swizzled K-major layout A uses (src/target/wgmma_layout.h with rows N, cols K),
// the trans is never lowered (lower_scan.cpp), and the emitter reads B with A's descriptor form
// (gpu_emit_wgmma.cpp). Every other f32 dot keeps mma.sync's tf32 atom (lower_dot.cpp).
//
// Every other f32 dot on the atom (B N-major, as loaded for dot(a, b)) computes C^T = B^T A^T
// instead (choose_wgmma_transposed): wgmma's A operand is B^T, whose K-major fragments each
// thread reads from B's N-major threadgroup array into registers (the register-A form), and its
// B operand is A itself (M x K, K-major: a descriptor). The copies and TMA stage A and B exactly
// as for f16 (the N-major swizzled blocks); the accumulator holds C^T's fragments and its
// layout (transposed_fragment) maps each register to C's element, so the epilogue and
// tile_store use it as any layout. A register fragment must not change while its wgmma runs,
// so the op waits for its own group before it ends (gpu_emit_wgmma_tf32.cpp).
//
// Rounding: the operands stay f32 in threadgroup memory and the tensor cores read their tf32
// bits, dropping the low 13 mantissa bits (truncation), where mma.sync's fragments round to
// nearest with cvt.rna: each product differs by at most one tf32 ulp from it. In the transposed
// form B^T's register fragments are rounded with cvt.rna (as mma.sync's) and A is truncated.
#include "passes/wgmma_tf32.h"

#include "ir/walk.h"

namespace metile {

namespace {

// The block holding `target` (the program body or a region of some op), and its index there.
const Block* block_of(const Block& blk, const Op* target, size_t* at) {
  for (size_t j = 0; j < blk.ops.size(); ++j) {
    if (&blk.ops[j] == target) {
      *at = j;
      return &blk;
    }
    for (const Block& r : blk.ops[j].regions)
      if (const Block* found = block_of(r, target, at)) return found;
  }
  return nullptr;
}

// The accumulator of the transposed form as a tile layout of C (m x n, element row * n + col):
// wgmma's rows are C's columns (64 per m64 block, wg_m warpgroups along them) and its columns
// C's rows (nw per warpgroup, wg_n warpgroups); warp q holds wgmma rows 16q..16q+15, a thread
// the m16n8 `c` fragment of each 8-column piece, registers over the fragment, the pieces, then
// the m64 blocks (the instruction's register order).
gpu::Layout transposed_fragment(const MatrixAtom& a, int64_t m, int64_t n, int64_t wg_m, int64_t wg_n) {
  constexpr int64_t kRows = 16;  // rows of the c fragment
  auto to_tile = [&](int64_t s) { return (s / kRows) * n + s % kRows; };  // (row, col) -> C(col, row)
  const int64_t rows = n / wg_m, nw = m / wg_n;
  std::vector<IntTuple> ts, td, rs, rd;
  append_atom_mode(a.c.mode(0), to_tile, ts, td);
  ts.emplace_back(int64_t{4});  // the warps of a warpgroup
  td.emplace_back(kRows);
  ts.emplace_back(wg_m);
  td.emplace_back(rows);
  ts.emplace_back(wg_n);
  td.emplace_back(nw * n);
  append_atom_mode(a.c.mode(1), to_tile, rs, rd);
  rs.emplace_back(nw / 8);  // 8-column pieces: 8 rows of C
  rd.emplace_back(8 * n);
  rs.emplace_back(rows / 64);  // m64 blocks: 64 columns of C
  rd.emplace_back(int64_t{64});
  return gpu::tile_layout(m * n, make_layout(IntTuple(ts), IntTuple(td)), make_layout(IntTuple(rs), IntTuple(rd)));
}

}  // namespace

bool choose_wgmma_transposed(const Program& p, const Op& o, const GpuTarget& target, bool rows_reduced,
                             gpu::Function& f, DotChoice& plan) {
  if (rows_reduced) return false;  // C's rows lie across warps of a warpgroup here
  const int64_t m = p.type(o.operands[0]).shape.dims[0], k = p.type(o.operands[0]).shape.dims[1];
  const int64_t n = p.type(o.operands[1]).shape.dims[1];
  const MatrixAtom* atom = nullptr;
  for (const MatrixAtom& a : target.warpgroup_atoms)
    if (atom == nullptr && a.ab == DType::f32 && a.acc == p.type(o.result()).dtype && k % a.k == 0) atom = &a;
  if (atom == nullptr || f.threads % 128 != 0) return false;
  const WgmmaTile ta = wgmma_tile(m, k, 4), tb = wgmma_tile(k, n, 4);  // both as loaded
  if (ta.swizzle == 0 || tb.swizzle == 0 || (m * k * 4) % 1024 != 0 || (k * n * 4) % 1024 != 0) return false;
  const int64_t groups = f.threads / 128;
  int64_t wg_m = 0, wg_n = 0;
  for (int64_t wn = 1; wn <= groups && wg_m == 0; ++wn) {
    const int64_t wm = groups / wn;
    if (groups % wn != 0 || n % (64 * wm) != 0 || m % wn != 0) continue;
    const int64_t nw = m / wn;
    if (nw % atom->n != 0 || nw > 256) continue;
    wg_m = wm;
    wg_n = wn;
  }
  if (wg_m == 0) return false;
  plan.atom = atom;
  plan.wgmma = true;
  plan.transposed = true;
  plan.warps_m = static_cast<int>(4 * wg_m);
  plan.warps_n = static_cast<int>(wg_n);
  plan.acc = f.add_layout(transposed_fragment(*atom, m, n, wg_m, wg_n));
  plan.staged[0] = ta;
  plan.staged[1] = tb;
  return true;
}

namespace {

// Where a dot is (its block and index there) and how often each value is read.
struct DotSite {
  const Block* blk = nullptr;
  size_t at = 0;
  std::vector<int> reads;
};

DotSite site_of(const Program& p, const Op& dot) {
  DotSite s;
  s.blk = block_of(p.body, &dot, &s.at);
  s.reads.assign(p.values.size(), 0);
  walk(p.body, [&](const Op& o) {
    for (ValueId x : o.operands) ++s.reads[x];
  });
  return s;
}

// The 2-D tile_load making v earlier in the dot's block, read once, with rows of whole 16-byte
// chunks and nothing between it and the dot writing memory (assign_layouts' direct copies).
const Op* copied_load(const Program& p, const DotSite& s, ValueId v) {
  if (s.blk == nullptr || s.reads[v] != 1) return nullptr;
  const Op* load = nullptr;
  size_t at_load = 0;
  for (size_t j = 0; j < s.at; ++j)
    if (s.blk->ops[j].kind == OpKind::TILE_LOAD && s.blk->ops[j].result() == v) {
      load = &s.blk->ops[j];
      at_load = j;
    }
  if (load == nullptr) return nullptr;
  const Type& t = p.type(v);
  if (t.shape.rank != 2 || (t.shape.dims[1] * static_cast<int64_t>(dtype_size(t.dtype))) % 16 != 0) return nullptr;
  for (size_t x = at_load + 1; x < s.at; ++x) {
    const OpKind k = s.blk->ops[x].kind;
    if (!has_trait(k, kPure) && k != OpKind::TILE_LOAD && k != OpKind::LOAD) return nullptr;
  }
  return load;
}

}  // namespace

const Op* wgmma_kmajor_b(const Program& p, const Op& dot, const LowerOptions& options) {
  const DType bt = p.type(dot.operands[1]).dtype;
  if (!options.async_copy || (bt != DType::f32 && !is_f8(bt))) return nullptr;
  const DotSite s = site_of(p, dot);
  if (s.blk == nullptr) return nullptr;
  // The trans making B, earlier in the dot's block and read by the dot alone.
  const Op* trans = nullptr;
  for (size_t j = 0; j < s.at; ++j) {
    const Op& o = s.blk->ops[j];
    if (o.kind == OpKind::TRANS && o.result() == dot.operands[1]) trans = &o;
  }
  if (trans == nullptr || s.reads[trans->result()] != 1) return nullptr;
  return copied_load(p, s, trans->operands[0]);
}

const Op* wgmma_copied_a(const Program& p, const Op& dot, const LowerOptions& options) {
  if (!options.async_copy) return nullptr;
  return copied_load(p, site_of(p, dot), dot.operands[0]);
}

}  // namespace metile
