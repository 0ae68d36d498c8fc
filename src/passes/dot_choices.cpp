// The choices layout assignment makes for a dot beyond its warp-level atom (dot_choices.h):
// which dots run on Hopper's warpgroup matrix units (sm_90a;
// GpuTarget::warpgroup_atoms) and in which form, and which mma.sync dots stage B K-major. They
// fill the dot's DotChoice before lowering; lowering (lower_warpgroup.cpp, lower_dot.cpp,
// lower_trans_operand.cpp) reads it and chooses nothing itself.
//
// The warpgroup atom.
//
// A dot takes a warpgroup atom when both operands are copied straight from tile_loads
// (assign_layouts' direct copies, so the copies are async_copy ops and a K loop may pipeline them),
// K is staged whole, the operand dtype has an atom (f16, bf16; tf32: below) and the threadgroup's
// warpgroups (threads / 128) tile the accumulator: wg_m x wg_n warpgroups, each 64 * rm rows (rm
// m64 instructions per k step) and nw = N / wg_n columns (a multiple of 8 up to 256). wg_n > 1 only
// when the columns of a warpgroup start a swizzle block of B and nothing reduces the rows across
// warps. Everything else keeps the warp-level atoms of lower_dot.cpp.
//
// The accumulator stays in registers in the warpgroup atom's fragment: warp q of a warpgroup holds
// rows 16q..16q+15 of each m64 block, a thread the m16n8 `c` fragment of each 8-column piece;
// registers run over the fragment, then the pieces, then the m64 blocks (the instruction's register
// order, one instruction per block), so the epilogue and tile_store use it as any other tile
// layout.
//
// tf32 on the warpgroup atom.
//
// The warpgroup atom has no transposed form for 32-bit operands: A and B must both be K-major in
// threadgroup memory. A (M x K, K contiguous) is; B of dot(a, b) is a K x N tile whose N is
// contiguous, so it is not. A dot takes the tf32 atom only where the program's B is already K-major
// in memory: dot(a, trans(t)) with t an N x K tile_load of the same block, read by that trans
// alone, the trans read by that dot alone, and nothing between the load and the dot writes memory
// (the rule of assign_layouts' direct copies). The dot then copies t itself (async copies or TMA)
// into the same swizzled K-major layout A uses (src/target/swizzled_tile.h with rows N, cols K),
// the trans is never lowered (lower_scan.cpp), and the emitter reads B with A's descriptor form
// (the CUDA emitter's warpgroup mma). Every other f32 dot keeps mma.sync's tf32 atom
// (lower_dot.cpp).
//
// Every other f32 dot on the atom (B N-major, as loaded for dot(a, b)) computes C^T = B^T A^T
// instead (choose_warpgroup_transposed): the warpgroup atom's A operand is B^T, whose K-major
// fragments each thread reads from B's N-major threadgroup array into registers (the register-A
// form), and its B operand is A itself (M x K, K-major: a descriptor). The copies and TMA stage A
// and B exactly as for f16 (the N-major swizzled blocks); the accumulator holds C^T's fragments and
// its layout (transposed_fragment) maps each register to C's element, so the epilogue and
// tile_store use it as any layout. A register fragment must not change while its MMAs run, so the
// op waits for its own group before it ends (the CUDA emitter's tf32 form).
//
// Rounding: the operands stay f32 in threadgroup memory and the tensor cores read their tf32
// bits, dropping the low 13 mantissa bits (truncation), where mma.sync's fragments round to
// nearest with cvt.rna: each product differs by at most one tf32 ulp from it. In the transposed
// form B^T's register fragments are rounded with cvt.rna (as mma.sync's) and A is truncated.
//
// FP8 on the warpgroup atom (f8e4m3 / f8e5m2 operands, f32 accumulator;
// m64nNk32 with A and B K-major).
//
// Which dots: on cuda the fp8_dots Tile IR pass leaves FP8 dots to lowering (DeviceInfo::
// lowers_fp8_dots). assign_layouts plans each as an f16 dot (dot_atom: the operands stage as their
// exact f16 values, cast in registers by stage()), and choose_warpgroup_atom replaces that plan
// with the FP8 atom where it can read the operands: the warpgroup atom has no transposed form for
// 8-bit operands, so A and B must both be K-major in threadgroup memory. A is when it is an M x K
// tile_load; B is when the program wrote dot(a, trans(b)) with b an N x K tile_load
// (torch._scaled_mm's column-major B, attention's K^T), each load read once in the dot's block with
// nothing writing memory before the dot (warpgroup_copied_a, warpgroup_kmajor_b). Both are copied
// as loaded (async copies or TMA) into the swizzled K-major blocks of src/target/swizzled_tile.h, K
// staged whole, the trans never lowered (lower_scan.cpp). Everything else stays on the exact f16
// path: B as loaded for dot(a, b) (K x N, N-major), loads read twice or across a store, threads not
// whole warpgroups, tiles no warpgroup shape fits, K chunked, async copies off.
//
// Accumulation: Hopper's FP8 warpgroup MMA adds its products into the accumulator with fewer bits
// than f32 (about 14 significant bits kept, as the DeepSeek-V3 report measured), so a long K loop
// on one accumulator loses accuracy. By default (plan.promote) each mma op computes its warpgroup
// sums into a separate register tile, starting from zero, and adds that tile into the f32
// accumulator every kFp8PromoteK elements of K (and at the op's end): the two-level accumulation of
// DeepGEMM and cuBLAS's default. METILE_GPU_OFF=fp8_promote (a piece of disabled_passes) is the
// fast accumulation: every warpgroup MMA accumulates straight into the accumulator, no extra
// registers and no wait before the additions.
//
// f16 / bf16 attention on the warpgroup atom (FlashAttention-3's form).
//
// Scores: dot(q, trans(k)) with k an N x K tile_load is the K-major B that direct_copies
// (assign_layouts.cpp) already copies as loaded, n rows of k, for mma.sync (DotChoice::b_kmajor).
// The warpgroup atom reads a 16-bit B K-major too (transpose flag 0): the copy goes into the
// swizzled K-major layout A uses (swizzled_b_tile with rows N, cols K) and the emitter reads B with
// A's descriptor form. Q, a tile_load before the loop, is no direct copy of the dot's block; an A
// defined outside the dot's block is staged from registers into its swizzled array (stage(),
// swizzled offsets) once: in the prologue of the pipelined loop that holds it (lower_pipeline.cpp),
// or at the dot, moved in front of the loop by hoist-invariant-staging.
//
// Output: dot(p.to(f16), v, acc) with p an element-wise function of the scores. The warpgroup
// atom's register-A form (m64nNk16: four .b32 registers a thread per k16 step, rows g and g + 8 of
// its warp's 16, columns 2t, 2t + 1 and 2t + 8, 2t + 9 of the step) holds exactly the values the
// m64nN accumulator of the scores holds in its 8-column pieces 2kk and 2kk + 1 (each thread the c
// fragment (g, 2t..2t+1), (g + 8, 2t..2t+1) of each piece). So a 16-bit dot whose A is an
// element-wise function of a warpgroup accumulator of the same shape (a_source, found by layout
// assignment), with one warpgroup column (warps_n 1) on both and the same warpgroups along M, takes
// A from registers in that fragment layout (DotChoice::register_a): no threadgroup array, no copy,
// no barrier for A. Layout assignment gives A that layout through the element-wise ops; lowering
// converts a tile that arrives in another one. B (V: K x N, N contiguous) is the ordinary N-major
// B. The fragment registers must not change while the MMAs read them, so the op waits for its group
// before it ends (the CUDA emitter's warpgroup mma).
//
// Both dots then split rows the same way: warpgroup g holds rows [rows g, +rows), warp q of it
// rows 16q..16q+15 of each m64 block, and a row's columns lie in one warp (4 lanes and the
// registers of the pieces): the softmax's row reductions stay within warps (rows_reduced keeps
// one warpgroup column). METILE_GPU_OFF=warpgroup_kmajor_b keeps the scores (and so the output's A)
// on mma.sync; warpgroup_register_a stages P, which keeps the output dot on mma.sync.
//
// A 16-bit B computed in registers (dot_scaled's decoded weights, any dequantized weight tile).
//
// dot(a, trans(t)) with a an M x K tile_load the dot copies (A streams through the K loop's
// ring) and t an N x K tile the dot's block computes, the trans read by the dot alone
// (DotChoice::b_stored, stored_b). The warpgroup atom reads a 16-bit B K-major, so t is stored as
// it is laid out, row n of the N x K swizzled tile holding column n of B: the registers of a
// canonical layout hold runs of consecutive K values, and vectorize-access makes each run of 8 one
// 16-byte store (the swizzle moves whole 16-byte chunks), where storing B itself would write 2
// bytes at a time, transposed. Lowering stores t at the dot each iteration; a pipelined loop gives
// B two slots and the loop's one barrier a step (lower_pipeline.cpp). The store is a lowering
// choice, not a pass over staged tiles: which array t goes to, in which layout, and where the
// barrier sits are fixed by the warpgroup plan and the pipeline, which lowering builds in one
// place. METILE_GPU_OFF=warpgroup_stored_b keeps such dots on mma.sync, B staged transposed.
//
// K-major B on mma.sync: kmajor_b_fits, for lower_trans_operand.cpp, which says how such a B is
// copied and read.
#include "passes/dot_choices.h"

#include "ir/walk.h"

namespace metile {

namespace {

// The target's first warpgroup atom for ab x ab -> acc whose k divides K (nullptr: none).
const MatrixAtom* warpgroup_atom(const GpuTarget& target, DType ab, DType acc, int64_t k) {
  for (Atom id : target.warpgroup_atoms)
    if (const MatrixAtom& a = matrix_atom(id); a.ab == ab && a.acc == acc && k % a.k == 0) return &a;
  return nullptr;
}
bool invariant_in_block(const Program& p, const Op& dot, ValueId v);  // below
bool stored_b(const Program& p, const Op& dot);                       // below

// The warpgroup accumulator layout above as a tile layout of the m x n tile (element row * n +
// col).
auto warpgroup_fragment(const MatrixAtom& a, int64_t m, int64_t n, int64_t wg_m, int64_t wg_n) {
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

bool choose_warpgroup_atom(const Program& p, const Op& o, const GpuTarget& target, const LowerOptions& options,
                           bool rows_reduced, const DotChoice* a_source, gpu::Function& f, DotChoice& plan) {
  if (!options.warpgroup || target.warpgroup_atoms.empty() || f.threads % 128 != 0) return false;
  const int64_t groups = f.threads / 128;
  const int64_t m = p.type(o.operands[0]).shape.dims[0], k = p.type(o.operands[0]).shape.dims[1];
  const int64_t n = p.type(o.operands[1]).shape.dims[1];
  // FP8 (below): both operands copied K-major from their tile_loads, whose FP8
  // dtypes replace the f16 staging planned for the warp-level atom.
  const bool fp8 = is_f8(p.type(o.operands[0]).dtype);
  DotChoice fp8_plan = plan;
  if (fp8 && !warpgroup_fp8_copies(p, o, target, options, fp8_plan)) return false;
  const DotChoice& in = fp8 ? fp8_plan : plan;
  if (in.atom == nullptr || in.kc != k) return false;
  // f16 / bf16 (below): B = trans(tile_load) K-major, A staged before the loop or from registers.
  const bool half = !fp8 && dtype_size(in.stage) == 2;
  const bool kmajor16 = half && in.b_kmajor && options.warpgroup_kmajor_b;
  const bool reg_a = half && in.direct[0] == nullptr && options.warpgroup_register_a && a_source != nullptr &&
                     a_source->warpgroup() && !a_source->transposed && a_source->warps_n == 1;
  const bool staged_a = kmajor16 && in.direct[0] == nullptr && !reg_a && invariant_in_block(p, o, o.operands[0]);
  if (in.direct[0] == nullptr && !reg_a && !staged_a) return false;
  if (in.b_kmajor && !kmajor16) return false;  // B copied n rows of k for mma.sync (lower_trans_operand.cpp)
  // 16-bit B = trans(t), t computed in registers (below): stored K-major, A streamed.
  const bool stored = half && in.direct[1] == nullptr && in.direct[0] != nullptr && options.warpgroup_stored_b &&
                      stored_b(p, o);
  // 3xTF32 would need each operand's residual staged beside it; mma.sync splits in registers.
  if (in.tf32x3) return false;
  // tf32, FP8 and 16-bit trans(tile_load): B K-major, copied from the N x K tile_load its trans reads.
  const Op* kmajor_b = in.stage == DType::f32 ? warpgroup_kmajor_b(p, o, options) : fp8 || kmajor16 ? in.direct[1] : nullptr;
  if (plan.stage == DType::f32 && kmajor_b == nullptr)  // B N-major: C^T = B^T A^T, B^T in registers
    return plan.direct[1] != nullptr && choose_warpgroup_transposed(p, o, target, rows_reduced, f, plan);
  if (plan.stage != DType::f32 && in.direct[1] == nullptr && !stored) return false;
  const MatrixAtom* atom = warpgroup_atom(target, in.stage, p.type(o.result()).dtype, k);
  if (atom == nullptr) return false;
  const int64_t elem = static_cast<int64_t>(dtype_size(in.stage));
  const SwizzledTile ta = swizzled_tile(m, k, elem), tb = swizzled_b_tile(k, n, elem, kmajor_b != nullptr || stored);
  // Whole 1024-byte blocks per stage keep every swizzle block of every stage aligned (A in
  // registers has no array).
  if ((!reg_a && (ta.swizzle == 0 || (m * k * elem) % 1024 != 0)) || tb.swizzle == 0 || (k * n * elem) % 1024 != 0)
    return false;
  int64_t wg_m = 0, wg_n = 0;
  for (int64_t wn = 1; wn <= groups && wg_m == 0; ++wn) {
    const int64_t wm = groups / wn;
    if (groups % wn != 0 || m % (64 * wm) != 0 || n % wn != 0) continue;
    const int64_t nw = n / wn;
    if (nw % atom->n != 0 || nw > 256) continue;
    if (wn > 1 && ((kmajor_b == nullptr && !stored && nw % tb.width() != 0) || rows_reduced)) continue;
    // A in registers: each warpgroup holds all of K for its rows, as a_source's accumulator did.
    if (reg_a && (wn != 1 || 4 * wm != a_source->warps_m)) continue;
    wg_m = wm;
    wg_n = wn;
  }
  if (wg_m == 0) return false;
  if (fp8) plan = fp8_plan;
  plan.atom = atom;
  if (kmajor_b != nullptr) plan.direct[1] = kmajor_b;  // tf32: the trans is not lowered
  plan.b_kmajor = plan.b_kmajor || stored;
  plan.b_stored = stored;
  plan.warps_m = static_cast<int>(4 * wg_m);
  plan.warps_n = static_cast<int>(wg_n);
  plan.acc = f.add_layout(warpgroup_fragment(*atom, m, n, wg_m, wg_n));
  // A's m x k fragments are those of an m x k accumulator over the same warpgroups.
  if (reg_a) plan.register_a = f.add_layout(warpgroup_fragment(*atom, m, k, wg_m, 1));
  plan.staged[0] = ta;
  plan.staged[1] = tb;
  return true;
}

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
// the warpgroup atom's rows are C's columns (64 per m64 block, wg_m warpgroups along them) and
// its columns C's rows (nw per warpgroup, wg_n warpgroups); warp q holds the atom's rows
// 16q..16q+15, a thread the m16n8 `c` fragment of each 8-column piece, registers over the
// fragment, the pieces, then the m64 blocks (the instruction's register order).
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

bool choose_warpgroup_transposed(const Program& p, const Op& o, const GpuTarget& target, bool rows_reduced,
                             gpu::Function& f, DotChoice& plan) {
  if (rows_reduced) return false;  // C's rows lie across warps of a warpgroup here
  const int64_t m = p.type(o.operands[0]).shape.dims[0], k = p.type(o.operands[0]).shape.dims[1];
  const int64_t n = p.type(o.operands[1]).shape.dims[1];
  const MatrixAtom* atom = warpgroup_atom(target, DType::f32, p.type(o.result()).dtype, k);
  if (atom == nullptr || f.threads % 128 != 0) return false;
  const SwizzledTile ta = swizzled_tile(m, k, 4), tb = swizzled_tile(k, n, 4);  // both as loaded
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
  plan.transposed = true;
  plan.warps_m = static_cast<int>(4 * wg_m);
  plan.warps_n = static_cast<int>(wg_n);
  plan.acc = f.add_layout(transposed_fragment(*atom, m, n, wg_m, wg_n));
  plan.staged[0] = ta;
  plan.staged[1] = tb;
  return true;
}

namespace {

// Whether v is defined outside the block holding `dot`, a region of some op (a loop's body): the
// same tile in every run of the block, which is staged once before it (the pipeline's prologue,
// or hoist-invariant-staging).
bool invariant_in_block(const Program& p, const Op& dot, ValueId v) {
  size_t at = 0;
  const Block* blk = block_of(p.body, &dot, &at);
  if (blk == nullptr || blk == &p.body) return false;
  for (ValueId a : blk->args)
    if (a == v) return false;
  for (const Op& o : blk->ops)
    for (ValueId r : o.results)
      if (r == v) return false;
  return true;
}

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
  for (size_t x = at_load + 1; x < s.at; ++x)
    if (!writes_no_memory(s.blk->ops[x])) return nullptr;
  return load;
}

// Whether dot's B is trans(t) made earlier in the dot's block and read by the dot alone, t a tile
// the block computes (not a tile_load: those are copied, warpgroup_kmajor_b and direct_copies).
bool stored_b(const Program& p, const Op& dot) {
  const DotSite s = site_of(p, dot);
  if (s.blk == nullptr) return false;
  for (size_t j = 0; j < s.at; ++j) {
    const Op& o = s.blk->ops[j];
    if (o.kind != OpKind::TRANS || o.result() != dot.operands[1] || s.reads[o.result()] != 1) continue;
    for (size_t x = 0; x < j; ++x)
      if (s.blk->ops[x].results.size() == 1 && s.blk->ops[x].result() == o.operands[0])
        return s.blk->ops[x].kind != OpKind::TILE_LOAD;
  }
  return false;
}

}  // namespace

bool writes_no_memory(const Op& op) {
  if (op.kind == OpKind::IF) {
    for (const Block& r : op.regions)
      for (const Op& x : r.ops)
        if (x.kind != OpKind::YIELD && !writes_no_memory(x)) return false;
    return true;
  }
  return has_trait(op.kind, kPure) || op.kind == OpKind::TILE_LOAD || op.kind == OpKind::LOAD;
}

const Op* warpgroup_kmajor_b(const Program& p, const Op& dot, const LowerOptions& options) {
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

const Op* warpgroup_copied_a(const Program& p, const Op& dot, const LowerOptions& options) {
  if (!options.async_copy) return nullptr;
  return copied_load(p, site_of(p, dot), dot.operands[0]);
}

bool warpgroup_fp8_copies(const Program& p, const Op& o, const GpuTarget& target,
                      const LowerOptions& options, DotChoice& plan) {
  const Op* a = warpgroup_copied_a(p, o, options);
  const Op* b = warpgroup_kmajor_b(p, o, options);
  if (a == nullptr || b == nullptr) return false;
  const int64_t m = p.type(o.operands[0]).shape.dims[0], k = p.type(o.operands[0]).shape.dims[1];
  const int64_t n = p.type(o.operands[1]).shape.dims[1];
  // K staged whole: both tiles (one byte an element) within half the threadgroup memory, the
  // rule dot_chunk applies to every staging.
  if (static_cast<uint64_t>((m + n) * k) > target.threadgroup_memory_bytes / 2) return false;
  plan.stage = p.type(o.operands[0]).dtype;
  plan.direct[0] = a;
  plan.direct[1] = b;
  plan.kc = k;
  plan.b_kmajor = false;
  plan.promote = 0;
  if (options.fp8_promote) {  // the largest multiple of 32 up to kFp8PromoteK that divides K
    plan.promote = kFp8PromoteK;
    while (plan.promote > 32 && k % plan.promote != 0) plan.promote -= 32;
  }
  return true;
}

bool kmajor_b_fits(const LowerOptions& options, const DotChoice& c, int64_t k) {
  // c.atom is a warp-level atom here (dot_atom): mma.sync's 16-bit ones read B K-major, and only
  // with ldmatrix, which the ldmatrix-fragments pass chooses for rows of k + staging_pad elements
  // (lower_dot.cpp's dot_buffers stages A and a K-major B so, K staged whole).
  if (!options.kmajor_b || !options.ldmatrix_fragments || c.atom == nullptr ||
      (c.atom->b_major & kBKMajor) == 0 || c.kc != k)
    return false;
  const int64_t ld = k + staging_pad(c.stage);
  return ldmatrix_fits(c.stage, c.atom->relaxed, ld, ld);
}

}  // namespace metile
