// keep_rows: a later tile_range pass that re-reads what an earlier pass over the same range read
// takes the values the earlier pass kept, when the row fits; otherwise it reads memory as written.
// Needs: activity-explicit Tile IR (loads carry their masks; no implicit inactive lanes) and,
// where the device needs them, the bounds guards already in the masks (this pass runs after
// "bounds", so a kept value is exactly the guarded load it replaces). Guarantees: every value
// and every store as written; a replaced load touches no memory when the row was kept.
//
// Two loops L1 (earlier) and L2 (later) in one block qualify when they have the same start and
// end, the same positive constant step, L1 and every op between them have no side effect, and
// the program writes no parameter it reads (param_access: then no store reaches what L1 read,
// given that distinct pointer parameters do not alias, which the cuda backend already assumes
// with __restrict__). A top-level load of L2 matches a top-level load of L1 when pointer, mask
// and `other` are the same expressions of the loop index (compared op by op, the two loop indices
// identified): iteration k of L2 then reads exactly what iteration k of L1 read.
// For such loads the pass picks K, the most iterations whose tiles fit the budget (at most
// kMaxKept, on GPUs kGpuMaxKept): on GPUs registers, kGpuElementsPerThread per thread of the
// num_threads option (256 threads when not given, the most the lowering picks by itself); on
// interp local arrays,
// kLocalBudgetBytes in all. The cpu device keeps nothing: there the re-read row is in the
// core's cache, while a kept tile costs an array copy per iteration and a select per element
// (measured on this project's 2-core VM, 2048 rows: the seed softmax 1.26x slower kept than
// re-read at N = BLOCK = 4096 with one slot, 2.8-3.3x with four); interp runs the rewrite so
// that the oracle checks it.
// Then, with fits = end - start <= K * step (in i64, once before L1; a runtime check on N):
//   - L1 carries K slots, zeros at first; slot j takes L1's loaded tile at iteration j
//     (select(k == j, x, slot_j), k = (i - start) / step; with K = 1 simply x);
//   - L2's load becomes select(fits, slot_k, load(p, mask & !fits, other)): when the row fits the
//     load is masked off everywhere and reads nothing; otherwise it reads as written.
// Runs with the compile option keep_rows (metile_compile_options.keep_rows), off by default: on an
// H100 (bench/results/cuda_rows_h100.md, run 3) every kept form measured slower than re-reading
// (seed softmax 4096x4096 0.88 vs 1.84 TB/s with two slots; even 1024x32768, where the row does
// not fit, 1.19 vs 1.74 TB/s: the carried slots and selects cost on every row); with one slot
// (run 4) still 1.61 vs 2.02 at 4096x4096 and 2.02 vs 2.16 at 16384x1024 (the kept tile's
// registers cost occupancy, and the re-read row is in L2), so the default stays the re-read.
// Run 7 again: 2.10 vs 2.58 TB/s at 16384x1024, 2.15 vs 2.41 at 4096x4096; the kept tile is
// live across the block reductions between the passes (seed softmax 40 -> 62 registers a thread
// at 1024 columns, rmsnorm 62 -> 115 at 4096).
//
// Threadgroup rows (devices with threadgroup memory: GPUs, and interp so that the oracle checks
// it; METILE_GPU_OFF=threadgroup_rows leaves the slots above): rows longer than a tile are kept
// in a threadgroup array instead, K tiles of it, K as many as fit the device's threadgroup memory
// less a reserve for the program's other arrays (rank-1 tiles). With fits = end - start <= K *
// step as above, in front of L1:
//   row = shared(K * B) {row}               one per kept load of B-element tiles
//   for i = start to (fits ? end : start) step s { store(row + slot(i), load(p, mask, other), mask) }
// (slot(i) = (i - start) / s * B + arange(0, B): the row's elements in order when s = B), and
// each matched load of L1 and L2 becomes
//   select(fits, load(row + slot(i), mask & fits, other), load(p, mask & !fits, other)).
// So the row is read from memory once, by a loop that does nothing else: the GPU pipeline's
// copy-rows-async pass issues the whole row's copies before the first is waited for (cp.async
// on cuda) and puts the barrier between them and the reads. A row array holds only what its
// copy loop stored and is read only where that loop's mask held ({row} tells lowering it needs
// no clearing). Why: on an H100 a 128 KB row (32768 f32) is evicted from L2 before its second
// pass (~7 programs an SM x 132 SMs of such rows exceed its 50 MB), so every pass re-read it
// from DRAM (bench/results/cuda_rows_h100.md). The array sets one program per SM on such a
// device whether or not the row fits, hence the option stays off by default: short rows, whose
// re-read hits L2, run as written.
#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include "ir/param_access.h"
#include "passes/tile/tile_emit.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {

namespace {

constexpr int64_t kMaxKept = 4;                  // slots per kept load: each costs a select
constexpr uint64_t kLocalBudgetBytes = 64 << 10;  // stack arrays per program instance
// GPUs keep one slot (rows of one tile): on an H100 two slots of a 4096-float tile took the
// seed softmax to 142 registers a thread and half its speed (run 4 of
// bench/results/cuda_rows_h100.md), four at 1024 floats cost four selects per element.
constexpr int64_t kGpuMaxKept = 1;
constexpr int64_t kGpuElementsPerThread = 16;  // registers per thread for the kept tile
constexpr int64_t kGpuDefaultThreads = 256;
// Threadgroup memory left to a program's other arrays (block reductions' and layout conversions'
// scratch): this much, or a sixteenth of the device's, whichever is more.
constexpr uint64_t kThreadgroupReserveBytes = 4096;

uint64_t row_budget(const TilePassContext& ctx) {
  const uint64_t limit = ctx.threadgroup_memory_bytes;
  if (ctx.options.disables("threadgroup_rows")) return 0;
  const uint64_t reserve = std::max(kThreadgroupReserveBytes, limit / 16);
  return limit > reserve ? limit - reserve : 0;
}

// No op in `op` (nested regions included) writes memory.
bool effect_free(const Op& op) {
  bool ok = true;
  auto check = [&](const Op& o) {
    ok = ok && (has_trait(o.kind, kPure) || o.kind == OpKind::LOAD || o.kind == OpKind::FOR ||
                o.kind == OpKind::YIELD);
  };
  check(op);
  for (const Block& r : op.regions) walk(r, check);
  return ok;
}

// A load of L2 and the load of L1 it reads again.
struct Match {
  size_t load2;  // index in L2's body
  size_t load1;  // index in L1's body
};

class Keeper {
 public:
  Keeper(Program& p, const TilePassContext& ctx) : p_(p), ctx_(ctx), row_budget_(row_budget(ctx)) {
    index_defs();
  }

  void block(Block& b) {
    for (Op& op : b.ops)
      for (Block& r : op.regions) block(r);
    for (size_t j = 0; j < b.ops.size(); ++j) {
      if (b.ops[j].kind != OpKind::FOR) continue;
      for (size_t i = 0; i < j; ++i)
        if (b.ops[i].kind == OpKind::FOR)
          if (std::optional<size_t> added = keep(b, i, j)) {
            j += *added;  // the ops keep() put before L1
            break;
          }
    }
  }

 private:
  const Op* def(ValueId v) const {
    auto it = defs_.find(v);
    return it == defs_.end() ? nullptr : it->second;
  }
  const Op* constant(ValueId v) const {
    const Op* d = def(v);
    return d != nullptr && d->kind == OpKind::CONST ? d : nullptr;
  }
  bool same_scalar(ValueId a, ValueId b) const {
    if (a == b) return true;
    const Op *da = constant(a), *db = constant(b);
    return da != nullptr && db != nullptr && p_.type(a) == p_.type(b) &&
           da->attr_num("value") == db->attr_num("value");
  }
  // `a` in L1's body and `b` in L2's compute the same value at the same iteration.
  bool same_expr(ValueId a, ValueId b, ValueId iv1, ValueId iv2, int depth = 0) const {
    if (a == iv1 || b == iv2) return a == iv1 && b == iv2;
    if (a == b || same_scalar(a, b)) return true;
    if (depth > 24 || a == kNoValue || b == kNoValue) return false;
    const Op *da = def(a), *db = def(b);
    if (da == nullptr || db == nullptr || da->kind != db->kind || !has_trait(da->kind, kPure) ||
        !da->regions.empty() || da->results.size() != 1 || da->operands.size() != db->operands.size() ||
        p_.type(a) != p_.type(b) || da->attrs.size() != db->attrs.size())
      return false;
    for (size_t k = 0; k < da->attrs.size(); ++k)
      if (da->attrs[k].name != db->attrs[k].name || !(da->attrs[k].value == db->attrs[k].value))
        return false;
    for (size_t k = 0; k < da->operands.size(); ++k)
      if (!same_expr(da->operands[k], db->operands[k], iv1, iv2, depth + 1)) return false;
    return true;
  }

  // Keeps what L2 = b.ops[j] re-reads of L1 = b.ops[i]; returns how many ops it put before L1.
  std::optional<size_t> keep(Block& b, size_t i, size_t j);
  // The same in threadgroup arrays (the file comment's threadgroup rows).
  std::optional<size_t> keep_in_threadgroup(Block& b, size_t i, size_t j, const std::vector<Match>& matches);

  // A load read from a row array: the array, its check, and the load's operands as written.
  struct Row {
    ValueId array, fits, spills;
    int64_t block;  // elements per tile
    std::vector<ValueId> operands;
  };
  // The operands `load` had as written (a load read_row rewrote had others).
  const std::vector<ValueId>& written_operands(const Op& load) const {
    auto it = rows_.find(load.results[0]);
    return it == rows_.end() ? load.operands : it->second.operands;
  }
  // Appends to `ops` the rewrite of `load` (at iteration `iv` of a loop from `start` by `step`):
  // the row array's tile where the row fits, memory otherwise.
  void read_row(std::vector<Op>& ops, Op load, Row row, ValueId iv, ValueId start, int64_t step);
  // row_index(ops, iv, ...): slot(iv) of the file comment, an i32 tile of `block` elements.
  ValueId row_index(std::vector<Op>& ops, ValueId iv, ValueId start, int64_t step, int64_t block, Loc loc);

  // What an earlier rewrite kept of one L1 load (by its result): a later loop reuses it.
  struct Kept {
    std::vector<ValueId> slots;  // L1's results, one per iteration kept
    ValueId fits, spills;        // end - start <= K * step, and its negation
  };

  void index_defs() {
    defs_ = defining_ops(p_.body);
  }
  // Inserts `ops` in front of b.ops[i] (defs_ points into the moved ops again); returns how many.
  size_t insert_before(Block& b, size_t i, std::vector<Op> ops) {
    const size_t n = ops.size();
    b.ops.insert(b.ops.begin() + static_cast<std::ptrdiff_t>(i), std::make_move_iterator(ops.begin()),
                 std::make_move_iterator(ops.end()));
    index_defs();
    return n;
  }

  Program& p_;
  const TilePassContext& ctx_;
  DefiningOps<Block> defs_;
  std::unordered_map<ValueId, Kept> kept_;
  uint64_t row_budget_;     // bytes of threadgroup memory for row arrays (0: keep in slots)
  uint64_t row_bytes_ = 0;  // of them, what the arrays made so far take
  std::unordered_map<ValueId, Row> rows_;  // by the memory load's result
};

std::optional<size_t> Keeper::keep(Block& b, size_t i, size_t j) {
  const Op& l1 = b.ops[i];
  const Op& l2 = b.ops[j];
  for (int k = 0; k < 3; ++k)
    if (!same_scalar(l1.operands[k], l2.operands[k])) return std::nullopt;
  const Op* step = constant(l1.operands[2]);
  if (step == nullptr || step->attr_num("value") < 1 || p_.type(l1.operands[0]).is_tile())
    return std::nullopt;
  for (size_t k = i; k < j; ++k)
    if (!effect_free(b.ops[k])) return std::nullopt;

  // The loads of L2 that read again what a load of L1 read.
  const Block& body1 = l1.body();
  const Block& body2 = l2.body();
  std::vector<Match> matches;
  uint64_t new_bytes = 0;
  int64_t new_elems = 0;
  for (size_t q = 0; q < body2.ops.size(); ++q) {
    const Op& ld2 = body2.ops[q];
    if (ld2.kind != OpKind::LOAD || !p_.type(ld2.results[0]).is_tile()) continue;
    for (size_t r = 0; r < body1.ops.size(); ++r) {
      const Op& ld1 = body1.ops[r];
      if (ld1.kind != OpKind::LOAD) continue;  // before written_operands: other ops may have no result
      const std::vector<ValueId>& operands1 = written_operands(ld1);
      if (operands1.size() != ld2.operands.size() || p_.type(ld1.results[0]) != p_.type(ld2.results[0]))
        continue;
      bool same = true;
      for (size_t k = 0; k < operands1.size(); ++k)
        same = same && same_expr(operands1[k], ld2.operands[k], body1.args[0], body2.args[0]);
      if (!same) continue;
      matches.push_back({q, r});
      if (!kept_.count(ld1.results[0])) {
        const Type t = p_.type(ld1.results[0]);
        new_bytes += static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
        new_elems += t.shape.numel();
      }
      break;
    }
  }
  if (matches.empty()) return std::nullopt;
  const ParamAccess access = param_access(p_);
  for (ValueId w : access.written)
    if (access.read.count(w)) return std::nullopt;
  if (row_budget_ > 0) return keep_in_threadgroup(b, i, j, matches);

  // K: the iterations whose tiles fit the budget (loads kept earlier keep their K).
  int64_t slots = ctx_.whole_tiles_in_order ? kMaxKept : kGpuMaxKept;
  if (new_elems > 0) {
    const int64_t threads =
        ctx_.options.num_threads > 0 ? ctx_.options.num_threads : kGpuDefaultThreads;
    slots = std::min<int64_t>(
        slots, ctx_.whole_tiles_in_order
                   ? static_cast<int64_t>(kLocalBudgetBytes / new_bytes)
                   : kGpuElementsPerThread * threads / new_elems);
  }
  for (const Match& m : matches) {
    auto it = kept_.find(body1.ops[m.load1].results[0]);
    if (it != kept_.end()) slots = std::min<int64_t>(slots, static_cast<int64_t>(it->second.slots.size()));
  }
  if (slots < 1) return std::nullopt;
  for (const Match& m : matches) {  // one K per L1: drop what was kept with another
    auto it = kept_.find(body1.ops[m.load1].results[0]);
    if (it != kept_.end() && static_cast<int64_t>(it->second.slots.size()) != slots)
      return std::nullopt;
  }

  // ---- rewrite -----------------------------------------------------------------------------
  const Loc loc = l2.loc;
  const int64_t step_value = static_cast<int64_t>(step->attr_num("value"));
  const ValueId start = l1.operands[0];
  std::vector<Op> before;
  auto emit = [&](std::vector<Op>& out, OpKind k, std::vector<ValueId> operands, Type t,
                  std::vector<Attr> attrs = {}) {
    return append_op(p_, out, k, std::move(operands), t, loc, std::move(attrs));
  };
  const Type i64 = Type::scalar(DType::i64), boolean = Type::scalar(DType::boolean);
  auto wide = [&](std::vector<Op>& out, ValueId v) {
    return p_.type(v) == i64 ? v : emit(out, OpKind::CAST, {v}, i64);
  };
  auto i64_const = [&](std::vector<Op>& out, int64_t x) {
    return emit(out, OpKind::CONST, {}, i64, {Attr{"value", x}});
  };
  // k == s for each slot s, k = (i - start) / step the iteration number (several slots only).
  auto slot_tests = [&](std::vector<Op>& out, ValueId iv) {
    std::vector<ValueId> is;
    if (slots == 1) return is;
    const ValueId off = emit(out, OpKind::SUB, {wide(out, iv), wide(out, start)}, i64);
    const ValueId k = emit(out, OpKind::DIV, {off, i64_const(out, step_value)}, i64);
    for (int64_t s = 0; s < slots; ++s)
      is.push_back(emit(out, OpKind::EQ, {k, i64_const(out, s)}, boolean));
    return is;
  };
  std::optional<std::pair<ValueId, ValueId>> guard;  // fits, spills of this L1
  for (const Match& m : matches) {
    auto it = kept_.find(body1.ops[m.load1].results[0]);
    if (it != kept_.end()) guard = {it->second.fits, it->second.spills};
  }
  if (!guard) {
    const ValueId span =
        emit(before, OpKind::SUB, {wide(before, l1.operands[1]), wide(before, start)}, i64);
    const ValueId fits =
        emit(before, OpKind::LE, {span, i64_const(before, slots * step_value)}, boolean);
    guard = {fits, emit(before, OpKind::NOT, {fits}, boolean)};
  }
  const auto [fits, spills] = *guard;

  // L1 carries K slots for each load not kept yet; slot s takes the tile of iteration s.
  Op& loop1 = b.ops[i];
  {
    Block& body = loop1.body();
    Op yield = std::move(body.ops.back());
    body.ops.pop_back();
    std::vector<ValueId> is;
    bool tested = false;
    for (const Match& m : matches) {
      const ValueId x = body.ops[m.load1].results[0];
      if (kept_.count(x)) continue;
      if (!tested) is = slot_tests(body.ops, body.args[0]);
      tested = true;
      const Type t = p_.type(x);
      const AttrValue zero_value = is_float(t.dtype) ? AttrValue{0.0} : AttrValue{int64_t{0}};
      const ValueId zero = emit(before, OpKind::CONST, {}, t.element(), {Attr{"value", zero_value}});
      const ValueId zeros = emit(before, OpKind::BROADCAST, {zero}, t);
      Kept k{{}, fits, spills};
      for (int64_t s = 0; s < slots; ++s) {
        const ValueId slot = p_.new_value(t);
        body.args.push_back(slot);
        loop1.operands.push_back(zeros);
        ValueId next = x;
        if (slots > 1) {
          const ValueId at = emit(body.ops, OpKind::BROADCAST, {is[s]}, t.with_dtype(DType::boolean));
          next = emit(body.ops, OpKind::SELECT, {at, x, slot}, t);
        }
        yield.operands.push_back(next);
        k.slots.push_back(p_.new_value(t));
        loop1.results.push_back(k.slots.back());
      }
      kept_.emplace(x, std::move(k));
    }
    body.ops.push_back(std::move(yield));
  }

  // L2: each matched load reads its slot when the row fits, memory otherwise.
  std::vector<std::pair<size_t, const Kept*>> uses;
  for (const Match& m : matches) uses.emplace_back(m.load2, &kept_.at(loop1.body().ops[m.load1].results[0]));
  std::sort(uses.begin(), uses.end());
  Block& body = b.ops[j].body();
  std::vector<Op> ops;
  ops.reserve(body.ops.size() + 8 * uses.size());
  const std::vector<ValueId> is = slot_tests(ops, body.args[0]);
  size_t u = 0;
  for (size_t q = 0; q < body.ops.size(); ++q) {
    if (u >= uses.size() || uses[u].first != q) {
      ops.push_back(std::move(body.ops[q]));
      continue;
    }
    const Kept& k = *uses[u++].second;
    Op load = std::move(body.ops[q]);
    const ValueId result = load.results[0];
    const Type t = p_.type(result);
    const Type mask_t = t.with_dtype(DType::boolean);
    const ValueId off = emit(ops, OpKind::BROADCAST, {spills}, mask_t);
    if (load.operands.size() >= 2)
      load.operands[1] = emit(ops, OpKind::BITAND, {load.operands[1], off}, mask_t);
    else
      load.operands.push_back(off);
    const ValueId read = p_.new_value(t);
    load.results[0] = read;
    ops.push_back(std::move(load));
    ValueId value = k.slots[slots - 1];
    for (int64_t s = slots - 2; s >= 0; --s) {
      const ValueId at = emit(ops, OpKind::BROADCAST, {is[s]}, mask_t);
      value = emit(ops, OpKind::SELECT, {at, k.slots[s], value}, t);
    }
    const ValueId use = emit(ops, OpKind::BROADCAST, {fits}, mask_t);
    emit(ops, OpKind::SELECT, {use, value, read}, t);
    ops.back().results[0] = result;
  }
  body.ops = std::move(ops);

  return insert_before(b, i, std::move(before));
}

ValueId Keeper::row_index(std::vector<Op>& ops, ValueId iv, ValueId start, int64_t step, int64_t block,
                          Loc loc) {
  const Type t = p_.type(iv);
  auto emit = [&](OpKind k, std::vector<ValueId> operands, Type rt, std::vector<Attr> attrs = {}) {
    return append_op(p_, ops, k, std::move(operands), rt, loc, std::move(attrs));
  };
  auto number = [&](int64_t x) { return emit(OpKind::CONST, {}, t, {Attr{"value", x}}); };
  ValueId at = emit(OpKind::SUB, {iv, start}, t);
  if (step != block) at = emit(OpKind::MUL, {emit(OpKind::DIV, {at, number(step)}, t), number(block)}, t);
  if (t.dtype != DType::i32) at = emit(OpKind::CAST, {at}, Type::scalar(DType::i32));
  return emit(OpKind::ARANGE, {at}, Type::tile(DType::i32, Shape::of(block)), {Attr{"size", block}});
}

void Keeper::read_row(std::vector<Op>& ops, Op load, Row row, ValueId iv, ValueId start, int64_t step) {
  const Loc loc = load.loc;
  const ValueId result = load.results[0];
  const Type t = p_.type(result), mask_t = t.with_dtype(DType::boolean);
  auto emit = [&](OpKind k, std::vector<ValueId> operands, Type rt) {
    return append_op(p_, ops, k, std::move(operands), rt, loc);
  };
  const ValueId at = row_index(ops, iv, start, step, row.block, loc);
  const ValueId ptrs = emit(OpKind::PTR_OFFSET, {row.array, at}, Type::ptr(t.dtype, AddrSpace::threadgroup, t.shape));
  const ValueId on = emit(OpKind::BROADCAST, {row.fits}, mask_t);
  const ValueId off = emit(OpKind::BROADCAST, {row.spills}, mask_t);
  const bool masked = load.operands.size() >= 2;
  std::vector<ValueId> kept{ptrs, masked ? emit(OpKind::BITAND, {load.operands[1], on}, mask_t) : on};
  if (load.operands.size() == 3) kept.push_back(load.operands[2]);
  const ValueId from_row = emit(OpKind::LOAD, std::move(kept), t);
  row.operands = load.operands;
  if (masked)
    load.operands[1] = emit(OpKind::BITAND, {load.operands[1], off}, mask_t);
  else
    load.operands.push_back(off);
  const ValueId read = p_.new_value(t);
  load.results[0] = read;
  ops.push_back(std::move(load));
  rows_.emplace(read, std::move(row));
  emit(OpKind::SELECT, {on, from_row, read}, t);
  ops.back().results[0] = result;
}

std::optional<size_t> Keeper::keep_in_threadgroup(Block& b, size_t i, size_t j,
                                                  const std::vector<Match>& matches) {
  const Op& l1 = b.ops[i];
  const Block& body1 = l1.body();
  const int64_t step = static_cast<int64_t>(constant(l1.operands[2])->attr_num("value"));
  // L1's loads kept now (each once, by its index in L1's body), and the bytes of one slot.
  std::vector<size_t> fresh;
  uint64_t slot_bytes = 0;
  for (const Match& m : matches) {
    const Op& ld1 = body1.ops[m.load1];
    if (p_.type(ld1.results[0]).shape.rank != 1) return std::nullopt;
    if (rows_.count(ld1.results[0]) || std::find(fresh.begin(), fresh.end(), m.load1) != fresh.end())
      continue;
    fresh.push_back(m.load1);
    const Type t = p_.type(ld1.results[0]);
    slot_bytes += static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
  }
  const int64_t slots =
      fresh.empty() || row_budget_ <= row_bytes_ ? 0 : static_cast<int64_t>((row_budget_ - row_bytes_) / slot_bytes);
  std::vector<Match> used;  // the matches whose L1 load has (or now gets) a row array
  for (const Match& m : matches)
    if (rows_.count(body1.ops[m.load1].results[0]) || slots >= 1) used.push_back(m);
  if (used.empty()) return std::nullopt;

  const Loc loc = b.ops[j].loc;
  const ValueId start = l1.operands[0], end = l1.operands[1];
  std::vector<Op> before;
  auto emit = [&](std::vector<Op>& out, OpKind k, std::vector<ValueId> operands, Type t,
                  std::vector<Attr> attrs = {}) {
    return append_op(p_, out, k, std::move(operands), t, loc, std::move(attrs));
  };
  std::unordered_map<size_t, Row> made;  // by index in L1's body
  if (slots >= 1) {
    row_bytes_ += static_cast<uint64_t>(slots) * slot_bytes;
    const Type i64 = Type::scalar(DType::i64), boolean = Type::scalar(DType::boolean);
    auto wide = [&](ValueId v) { return p_.type(v) == i64 ? v : emit(before, OpKind::CAST, {v}, i64); };
    const ValueId span = emit(before, OpKind::SUB, {wide(end), wide(start)}, i64);
    const ValueId limit = emit(before, OpKind::CONST, {}, i64, {Attr{"value", slots * step}});
    const ValueId fits = emit(before, OpKind::LE, {span, limit}, boolean);
    const ValueId spills = emit(before, OpKind::NOT, {fits}, boolean);
    // The copy loop: L1's loads as written (their operands' ops cloned), each stored to its row.
    const ValueId iv1 = body1.args[0], iv0 = p_.new_value(p_.type(iv1));
    std::vector<Op> copy;
    std::unordered_map<ValueId, ValueId> map{{iv1, iv0}};
    std::unordered_map<ValueId, const Op*> in_body;
    for (const Op& op : body1.ops)
      for (ValueId r : op.results) in_body[r] = &op;
    auto clone = [&](auto&& self, ValueId v) -> ValueId {
      if (auto it = map.find(v); it != map.end()) return it->second;
      auto def = in_body.find(v);
      if (def == in_body.end()) return v;
      Op c = *def->second;
      for (ValueId& o : c.operands) o = self(self, o);
      for (ValueId& r : c.results) {
        const ValueId fresh_r = p_.new_value(p_.type(r));
        map[r] = fresh_r;
        r = fresh_r;
      }
      copy.push_back(std::move(c));
      return map.at(v);
    };
    for (size_t q : fresh) {
      const Op& ld1 = body1.ops[q];
      const Type t = p_.type(ld1.results[0]);
      const int64_t block = t.shape.numel();
      const ValueId array = emit(before, OpKind::SHARED, {}, Type::ptr(t.dtype, AddrSpace::threadgroup),
                                 {Attr{"size", slots * block}, Attr{"row", int64_t{1}}});
      Op load;
      load.kind = OpKind::LOAD;
      load.loc = ld1.loc;
      for (ValueId o : ld1.operands) load.operands.push_back(clone(clone, o));
      const ValueId x = p_.new_value(t);
      load.results = {x};
      copy.push_back(load);
      const ValueId at = row_index(copy, iv0, start, step, block, ld1.loc);
      Op store;
      store.kind = OpKind::STORE;
      store.loc = ld1.loc;
      store.operands = {emit(copy, OpKind::PTR_OFFSET, {array, at}, Type::ptr(t.dtype, AddrSpace::threadgroup, t.shape)),
                        x};
      if (load.operands.size() >= 2) store.operands.push_back(load.operands[1]);
      copy.push_back(std::move(store));
      made.emplace(q, Row{array, fits, spills, block, {}});
    }
    Op yield;
    yield.kind = OpKind::YIELD;
    yield.loc = loc;
    copy.push_back(std::move(yield));
    Op loop;
    loop.kind = OpKind::FOR;
    loop.loc = l1.loc;
    loop.operands = {start, emit(before, OpKind::SELECT, {fits, end, start}, p_.type(end)), l1.operands[2]};
    loop.regions.push_back(Block{{iv0}, std::move(copy)});
    before.push_back(std::move(loop));
  }

  // L1 reads what it loads anew from the rows; L2 reads each matched load from its row.
  auto rewrite = [&](Block& body, const std::unordered_map<size_t, const Row*>& at) {
    std::vector<Op> ops;
    ops.reserve(body.ops.size() + 12 * at.size());
    for (size_t q = 0; q < body.ops.size(); ++q) {
      auto it = at.find(q);
      if (it == at.end())
        ops.push_back(std::move(body.ops[q]));
      else
        read_row(ops, std::move(body.ops[q]), *it->second, body.args[0], start, step);
    }
    body.ops = std::move(ops);
  };
  std::unordered_map<size_t, const Row*> at1, at2;
  for (auto& [q, row] : made) at1[q] = &row;
  for (const Match& m : used) {
    auto it = made.find(m.load1);
    at2[m.load2] = it != made.end() ? &it->second : &rows_.at(body1.ops[m.load1].results[0]);
  }
  rewrite(b.ops[j].body(), at2);  // before L1's: at2 may point into rows_, which L1's adds to
  rewrite(b.ops[i].body(), at1);

  return insert_before(b, i, std::move(before));
}

}  // namespace

void keep_row_values(Program& program, const TilePassContext& ctx) {
  if (program.num_threads > 0) return;  // SIMT kernels place their own data
  if (ctx.whole_tiles_in_order && !ctx.device_checks_accesses) return;  // the cpu (see above)
  Keeper(program, ctx).block(program.body);
}

}  // namespace metile
