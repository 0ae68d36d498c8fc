/** \file lower_internal.h
 * The state shared by the lowering files: lower.cpp (driver, layouts, element-wise ops, loops,
 * roles, SIMT ops), lower_memory.cpp (loads, stores, tile copies, shared memory) and
 * lower_reduce.cpp (reductions and layout changes through threadgroup memory, or in registers
 * where in_place_reduce.h finds a plan), lower_scan.cpp
 * (cumsum, cumprod, trans), lower_print.cpp (device_print) and lower_control.cpp (if, while).
 *
 * A Tile IR tile value maps to a uniform GPU value (all elements equal, e.g. a broadcast
 * scalar), or to a value in some tile layout: the one layout assignment gave it
 * (assign_layouts.cpp: the accumulator fragment layout of a dot, its epilogue and its
 * loop-carried accumulator, the layout a row or column reduction of such a tile leaves, index
 * math computed where it is used), layout_for(its shape), or, for a
 * reshape or a reduction, the layout its operand had. An op that needs a particular layout
 * converts its operands (materialize; canonical() for layout_for), so only conversions,
 * broadcasts and axis reductions move elements between threads.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "passes/assign_layouts.h"
#include "passes/in_place_reduce.h"
#include "passes/lower.h"
#include "target/tma.h"
#include "support/error.h"

namespace metile::lowering {

using gpu::GpuBuilder;
using gpu::LayoutId;

// --- lower_pipeline.cpp ---
/** Adds to `slice` the positions (`pos`: a body op's results -> its position) of the pure scalar
 * ops of `body` that v depends on; false when v depends on a value the body carries, on one of
 * `excluded` or on any other op. Values from outside the body, and its induction variable, need
 * nothing. */
bool scalar_slice(const Program& p, const Block& body, const std::map<ValueId, size_t>& pos,
                  const std::set<ValueId>& excluded, ValueId v, std::set<size_t>& slice);

class Lowering {
 public:
  Lowering(const Program& p, const GpuTarget& target, const LowerOptions& options,
           const LayoutAssignment& layouts);
  gpu::Function run();

  // --- lower.cpp ---
  const Program& p;
  const GpuTarget& target;
  const LowerOptions& options;
  gpu::Function f;
  gpu::Block prologue;  // builtins and allocations, placed before the body at the end
  gpu::Block init;      // clears shared memory; runs after the prologue, before the body
  GpuBuilder b{f, &f.body};
  GpuBuilder pb{f, &prologue};
  int64_t simt = 0;  // the SIMT thread count T, 0 for kernels without SIMT ops
  int64_t chunk = 4;  // elements per chunk of the canonical layouts (canonical_chunk)
  std::vector<ValueId> map;  // Tile IR value -> GPU value
  std::vector<const Op*> producer;  // Tile IR value -> the op that defines it (operand_in)
  int64_t role_lo = 0, role_hi = INT64_MAX;  // threads of the enclosing simdgroup roles
  int loop_depth = 0;            // names induction variables i, j, k...
  const Op* current = nullptr;

  template <typename... Args>
  [[noreturn]] void unsupported(Args&&... parts) const {
    fail(METILE_ERROR_UNSUPPORTED, "lower", p.where(current->loc), op_name(current->kind), ": ",
         std::forward<Args>(parts)...);
  }

  /** The canonical layout of a tile shape (see lower.cpp). */
  LayoutId layout_for(const Shape& s);
  /** The layout Tile IR tile value v lives in: its assigned one, else layout_for(shape). */
  LayoutId layout_of(ValueId tile_value);
  ValueId get(ValueId tile_value) const;
  void set(ValueId tile_value, ValueId gpu_value) { map.at(tile_value) = gpu_value; }
  /**
   * `v` in layout `l`: itself, a splat of a uniform value, or a convert_layout of a tile (the
   * conversion where two layouts meet; lower_convert_layout.cpp expands it).
   */
  ValueId materialize(ValueId v, LayoutId l);
  /**
   * Tile IR value v in layout l: index math (aranges and element-wise ops on them and on
   * scalars) is computed again in l, a few integer ops, where converting it would go through
   * threadgroup memory; anything else is materialized.
   */
  ValueId operand_in(ValueId v, LayoutId l);
  /** An arange's start + its coordinate in layout l. */
  ValueId arange_in(const Op& arange, LayoutId l);
  /** The GPU value of tile value v in layout_for(its shape) unless it is uniform. */
  ValueId canonical(ValueId tile_value);
  /** The GPU value for Tile IR value `v` in layout_for(its shape) (splats uniform tiles). */
  ValueId as_tile(ValueId tile_value);
  ValueId builtin(gpu::Builtin which, int axis = 0);
  ValueId c_i32(int64_t v) { return b.constant_int(DType::i32, v); }
  ValueId zero(DType d);
  /** a && b where either may be kNoValue (absent = true). */
  ValueId and_pred(ValueId a, ValueId b);
  /** Registers of layout l that hold elements (kNoValue when l has no padding). */
  ValueId valid_pred(LayoutId l);
  /**
   * The threads a store through the Tile IR pointer tile `ptrs` may write under the enclosing
   * roles: kNoValue unless it is a T-element 1-D tile (see role()).
   */
  ValueId role_predicate(ValueId ptrs_tile);
  std::string param_stem(ValueId gpu_ptr) const;

  void block(const Block& blk);
  void op(const Op& op);
  void elementwise(const Op& op);
  void loop(const Op& op);
  void role(const Op& op);
  void simt_op(const Op& op);
  void swizzle(const Op& op);
  /** Whether some buffer is both written and read, so user barriers must order device memory. */
  bool device_exchange();
  int device_exchange_ = -1;  // memo: -1 unknown

  // --- lower_memory.cpp ---
  void load(const Op& op);
  void store(const Op& op);
  void tile_load(const Op& op);
  void tile_store(const Op& op);
  void shared(const Op& op);
  /**
   * Pointers and predicate of a tile_load/tile_store: ix = (row, col, stride[, rows, cols]);
   * the predicate covers padding and the bounds (kNoValue when nothing is ever masked).
   */
  std::pair<ValueId, ValueId> tile_access(ValueId ptr, std::vector<ValueId> ix, const Shape& shape,
                                          LayoutId l);

  // --- lower_control.cpp ---
  void branch(const Op& op);
  void while_loop(const Op& op);
  LayoutId carried_layout(ValueId tile_value);
  std::vector<ValueId> fresh_values(const std::vector<ValueId>& like, const std::string& stem);
  /** Lowers a Tile IR block of an if or while into `gb` (see lower_control.cpp). */
  void region(const Block& tb, gpu::Block& gb, const std::vector<ValueId>& args,
              const std::vector<LayoutId>& layouts, bool cond);
  /** The GPU value of a bool scalar condition; UNSUPPORTED when it is not uniform. */
  ValueId uniform_condition(ValueId cond);

  // --- lower_atomic.cpp ---
  void atomic(const Op& op);

  // --- lower_scan.cpp ---
  void scan(const Op& op);
  void trans(const Op& op);

  // --- lower_print.cpp ---
  void print(const Op& op);

  // --- lower_dot.cpp ---
  /** How one dot runs: what layout assignment chose (atom, warp grid, K chunk, direct copies),
   * plus the staging arrays lowering allocates. */
  struct DotPlan : DotChoice {
    ValueId bufs[2] = {kNoValue, kNoValue};  // staging arrays of A and B (all stages)
    int64_t ld[2] = {0, 0}, elems[2] = {0, 0};  // row stride and elements of one stage
  };
  /** The K loop of dots whose operands stream through a ring of stages (lower_pipeline.cpp). */
  struct Pipeline {
    int64_t stages = 1;
    std::vector<const Op*> dots;
    std::vector<const Op*> slice;  // pure body ops the copies' addresses need, in body order
    ValueId start = kNoValue, end = kNoValue, step = kNoValue;  // the GPU loop bounds
    ValueId iteration = kNoValue, stage = kNoValue;  // in the body: (iv - start) / step, its stage
    ValueId bars = kNoValue;  // one mbarrier per stage when some copies are TMA's (lower_tma.cpp)
    int64_t arrivals = 0;     // TMA copies per stage
    bool tma_only = false;    // every copy is TMA's and every dot on the warpgroup atom: one warpgroup MMA group stays in flight
    // Some dot streams one operand only, the other held for the whole loop (A in registers, or
    // staged in the prologue: flash attention's Q K^T and P V). Its copies go at the top of the body.
    bool copies_at_top = false;
    // Its one dot stores B from registers each iteration (DotChoice::b_stored): the ring's wait,
    // the barrier and the later iteration's copies go at that dot (pipeline_sync), after the
    // body's register work, which so overlaps the previous iteration's warpgroup MMAs.
    bool sync_at_dot = false;
    const Op* loop = nullptr;
    ValueId iv = kNoValue;  // in the body: the GPU induction variable (sync_at_dot)
    std::set<const Op*> in_flight;  // warpgroup dots whose mma stays in flight (chained accumulators)
    // Synchronous copies (lower_double_buffer.cpp): the next iteration's tiles wait in registers
    // (per dot, A's then B's) from the top of the body to its bottom.
    bool prefetch = false;
    std::vector<ValueId> prefetched;
    // A loop over output tiles around this one (lower_persistent.cpp): that loop, the pure ops
    // of its body the copies need, its GPU bounds; per tile the iterations (mod 2S) and the
    // tile's first global iteration (mod 2S); `guard` is ANDed into the copies' in_range.
    const Op* outer = nullptr;
    std::vector<const Op*> outer_slice;
    ValueId outer_start = kNoValue, outer_end = kNoValue, outer_step = kNoValue;
    ValueId count = kNoValue, base = kNoValue, guard = kNoValue;
  };
  std::map<const Op*, Pipeline> pipelines;             // by Tile IR loop
  std::map<const Op*, const Pipeline*> pipelined_dots;  // dot -> its loop's pipeline
  /** Picks the loops to pipeline (the dots' direct copies chosen by assign_layouts). */
  void plan_pipelines();
  /** Loop hooks: before the loop, at the top and bottom of its body, after it. */
  /** Returns the carried stage counter's initial value, or kNoValue (LowerOptions::stage_counter). */
  ValueId pipeline_prologue(const Op& loop, ValueId start, ValueId end, ValueId step);
  /** `counter`: the loop's carried stage argument or kNoValue; bottom returns its next value. */
  void pipeline_top(const Op& loop, ValueId iv, ValueId counter);
  ValueId pipeline_bottom(const Op& loop, ValueId iv);
  void pipeline_epilogue(const Op& loop);
  /** A sync_at_dot loop's wait for its ring, barrier and next copies, at its dot. */
  void pipeline_sync(const Op& dot);
  /** Issues the copies of every pipelined dot of `pl` for the iteration at `kv` into `stage`. */
  void pipeline_copies(const Op& loop, Pipeline& pl, ValueId kv, ValueId stage);
  /** The copies of the iteration at `kv` (stages - 1 ahead) into the stage the last one read. */
  void next_copies(const Op& loop, Pipeline& pl, ValueId kv);
  /** Whether a dot streaming one operand holds the other for the whole loop (in registers, or
   * defined before it and staged once), so that it can be pipelined. */
  bool held_operands(const Op& dot, const std::map<ValueId, size_t>& pos, const Block& body) const;
  /** The staging arrays of a dot (allocated on first use, `stages` deep). */
  std::pair<ValueId, ValueId> dot_buffers(const Op& dot, int64_t stages);
  void async_commit();
  void async_wait(int64_t pending);
  std::set<const Op*> direct_loads;  // tile_loads a dot copies itself (lowered there, not here)
  std::map<const Op*, DotPlan> dot_plans;
  std::vector<LayoutId> assigned;  // Tile IR value -> layout (assign_layouts; kUniform: layout_for(shape))
  /**
   * Writes tile value v into threadgroup array buf as dtype d, row-major with row stride ld:
   * the indices [lo, lo + len) of axis `axis`, shifted to start at 0. swizzled: a warpgroup
   * operand's array (lower_warpgroup.cpp), in whose layout the elements go instead. kmajor: v is
   * B = trans(t) and the array holds t as it is laid out, n rows of k (DotChoice::b_stored).
   */
  void stage(ValueId tile_value, ValueId buf, DType d, int64_t ld, int axis, int64_t lo,
             int64_t len, const SwizzledTile* swizzled = nullptr, bool kmajor = false);
  /**
   * Copies tile_load `load` into threadgroup array buf (row stride ld) with async_copy; where
   * the uniform `in_range` is false, zeros.
   */
  void stage_direct(const Op& load, ValueId buf, int64_t ld, ValueId in_range = kNoValue);
  void dot(const Op& op);

  // --- lower_double_buffer.cpp ---
  /** The stages a K loop gets on a target without asynchronous copies: 2, or 1 (none). */
  int64_t double_buffer_stages() const;
  /** Before the loop: iteration 0's tiles into stage 0, a barrier. */
  void prefetch_prologue(const Op& loop, Pipeline& pl);
  /** At the top of the body: the next iteration's tiles into registers (zeros past the end). */
  void prefetch_next(const Op& loop, Pipeline& pl);
  /** At the bottom: those registers into the other stage, then the iteration's one barrier. */
  void prefetch_store(Pipeline& pl);

  // --- lower_trans_operand.cpp ---
  /** Whether a dot's A or B operand is the only read of Tile IR value `tile_value`. */
  bool only_a_dot_reads(ValueId tile_value);
  int reads_of(ValueId tile_value);        // operands naming a Tile IR value
  std::vector<int> read_counts;            // Tile IR value -> operands naming it (lazily)
  std::map<ValueId, ValueId> trans_views;  // trans result -> its operand, staged transposed

  // --- lower_warpgroup.cpp ---
  /** The tile_loads a warpgroup dot stages, and the swizzled layout each is copied into. */
  std::map<const Op*, SwizzledTile> warpgroup_staging;
  /** The element offset of chunk (r, c) of tile_load `load` in its staging array. */
  ValueId staging_offset(const Op& load, ValueId r, ValueId c, int64_t ld);
  /** The element offset of (r, c) in swizzled tile t; chunk_start: c starts a 16-byte chunk. */
  ValueId swizzled_offset(const SwizzledTile& t, ValueId r, ValueId c, bool chunk_start);
  /** Where copies a warpgroup dot reads were waited for (before the barrier) and after a pipelined
   * loop: waits for the warpgroup's MMAs and fences the copies for the async proxy. */
  void warpgroup_sync_for(const std::vector<const Op*>& dots);

  // --- lower_tma.cpp ---
  std::map<const Op*, std::pair<int64_t, TmaMap>> tma_loads;  // tile_load -> (map index, map)
  std::map<const Op*, ValueId> tma_slabs;  // tile_load -> the slab index of its base (TmaMap::slabs)
  /** Picks the loads TMA copies (tma_loads, pl.arrivals, pl.tma_only); emits nothing. */
  void tma_plan(Pipeline& pl);
  /** Before a pipeline's first copies: tma_plan, then sets up the mbarriers. */
  void tma_prologue(Pipeline& pl);
  /** Copies operand i (0: A, 1: B) of pipelined dot d into `buf` (stage `stage`): TMA or async_copy. */
  void stage_operand(const Op& d, int i, ValueId buf, ValueId stage, ValueId in_range, const Pipeline& pl);
  /** At the top of the body: waits for the TMA copies of this iteration's stage. */
  void tma_wait(const Pipeline& pl);
  /** tma_only, before the bottom's copies: every warpgroup is done with the previous stage. */
  void tma_release(const Pipeline& pl);

  // --- lower_persistent.cpp ---
  std::map<const Op*, const Op*> persistent_loops;  // loop over tiles -> its pipelined K loop
  std::map<const Op*, ValueId> persistent_tid;      // loop over tiles -> the thread index it hid
  /** Picks the loops over tiles whose K loop's first stages are issued a tile ahead. */
  void plan_persistent();
  /** Before such a loop: the mbarriers and the first tile's first stages. */
  void persistent_before(const Op& outer, ValueId start, ValueId end, ValueId step);
  /** In place of the K loop's prologue: this tile's base iteration; the stage counter's start. */
  ValueId persistent_prologue(Pipeline& pl);
  /** After the K loop: the next tile's first stages, then an opaque thread index. */
  void persistent_next_tile(Pipeline& pl);
  /** After the loop over tiles' body: the thread index as before. */
  void persistent_body_done(const Op& outer);
  void persistent_copies(Pipeline& pl, ValueId outer_iv, ValueId base, ValueId exists);
  /** Whether the loop over tiles runs an iteration at `iv` (its own test). */
  ValueId outer_runs(const Pipeline& pl, ValueId iv);

  // --- lower_reduce.cpp ---
  void reduce(const Op& op);
  /** Whole-tile reductions lowered ahead of their place by reduce() (sharing its exchange);
   * block() skips them. `block_now`: the block whose ops block() is lowering. */
  std::set<const Op*> lowered_early;
  const Block* block_now = nullptr;
  /** The whole-tile reductions `op` and later ones of its block that can share one exchange. */
  std::vector<const Op*> reductions_together(const Op& op, DType dtype);
  /** Whether thread t is the first of the threads holding the same elements in layout l (one
   * copy of each element); kNoValue when no two threads share elements. */
  ValueId owner_pred(LayoutId l);
  void broadcast(const Op& op);
  void reshape(const Op& op);
  /** Folds axis `axis` of the 2-D tile x (accumulating in d) into a tile of out_shape. */
  ValueId axis_reduce(Reduction k, ValueId x, DType d, const Shape& s, int axis, const Shape& out_shape);
  /** axis_reduce without moving the tile: registers, then lanes, then (if several simdgroups
   * hold a row) one partial per simdgroup through threadgroup memory; kNoValue when x's layout
   * does not allow it (padding, a non power-of-two thread or register count, a non-linear map). */
  ValueId axis_reduce_in_place(Reduction k, ValueId x, DType d, const Shape& s, int axis,
                               const Shape& out_shape);
  /** Identity of a reduction for dtype d: 0, the lowest or the highest value. */
  ValueId identity(Reduction reduce, DType d);
  ValueId combine(Reduction reduce, ValueId a, ValueId b);
  /**
   * Threadgroup scratch memory of dtype d, at least `size` elements (one array per dtype,
   * shared by every exchange; each exchange ends with a barrier before the array is reused).
   * `turn` 1: the second array of the dtype, which whole-tile reductions take every other time
   * (LowerOptions::alternate_scratch).
   */
  ValueId scratch(DType d, int64_t size, int turn = 0);
  /**
   * Moves the elements of `x` (tile layout) into layout `to`: every thread writes its valid
   * registers to scratch at their element index, then reads element src(e) for each element e
   * it owns in `to`; `src` builds the source index from the destination's element index.
   */
  template <typename Src>
  ValueId exchange(ValueId x, LayoutId to, Src&& src);

  /**
   * Appends a GPU `for` loop over [start, end) by step (uniform i32 values) carrying `inits`;
   * body(iv, carried) emits the body and returns the yielded values. Returns the results.
   */
  template <typename Body>
  std::vector<ValueId> for_loop(ValueId start, ValueId end, ValueId step,
                                const std::vector<ValueId>& inits, const std::string& iv_stem,
                                Body&& body);

  /** Runs fold(round) for round in [0, rounds): inline with a constant 0 when there is one
   * round, else in a GPU `for` loop (work spread over more lines than threads). */
  template <typename Fold>
  void each_round(int64_t rounds, Fold&& fold) {
    if (rounds == 1) {
      fold(c_i32(0));
      return;
    }
    for_loop(c_i32(0), c_i32(rounds), c_i32(1), {}, "round", [&](ValueId round, const auto&) {
      fold(round);
      return std::vector<ValueId>{};
    });
  }

  std::map<std::pair<DType, int>, std::pair<ValueId, int64_t>> scratch_arrays;  // (dtype, turn)
  std::map<DType, int> reductions_lowered;  // whole-tile reductions through scratch, per dtype
  std::map<std::pair<gpu::Builtin, int>, ValueId> builtins;  // (builtin, axis) -> value
};

template <typename Src>
ValueId Lowering::exchange(ValueId x, LayoutId to, Src&& src) {
  const gpu::Value xv = f.value(x);  // copies: new values and layouts grow the tables
  if (xv.is_ptr)  // the builder folds pointer broadcasts into offsets; what is left has no path
    unsupported("moving a tile of pointers between layouts is not supported on ", options.device,
                " yet (broadcast the offsets instead of the pointers)");
  ValueId buf = scratch(xv.dtype, std::max(f.layout(xv.layout).numel, f.layout(to).numel));
  ValueId e_from = b.named(b.coord(xv.layout, builtin(gpu::Builtin::thread_index)), "idx");
  b.store(b.ew(OpKind::PTR_OFFSET, {buf, e_from}), x, valid_pred(xv.layout));
  b.barrier();
  ValueId e_to = b.named(b.coord(to, builtin(gpu::Builtin::thread_index)), "idx");
  ValueId at = b.ew(OpKind::PTR_OFFSET, {buf, src(e_to)});
  ValueId pred = valid_pred(to);
  ValueId out = pred == kNoValue ? b.load(at) : b.load(at, pred, zero(xv.dtype));
  b.barrier();
  return b.named(out, xv.stem);
}

template <typename Body>
std::vector<ValueId> Lowering::for_loop(ValueId start, ValueId end, ValueId step,
                                        const std::vector<ValueId>& inits,
                                        const std::string& iv_stem, Body&& body) {
  gpu::Op loop;
  loop.kind = gpu::GpuOpKind::FOR;
  loop.operands = {start, end, step};
  loop.regions.emplace_back();
  gpu::Block& blk = loop.regions[0];
  blk.args.push_back(b.named(b.new_value(f.value(start).dtype, gpu::kUniform), iv_stem));
  std::vector<ValueId> carried;
  for (ValueId v : inits) {
    const gpu::Value iv = f.value(v);  // a copy: new values grow the table
    loop.operands.push_back(v);
    carried.push_back(b.named(b.new_value(iv.dtype, iv.layout, iv.is_ptr, iv.space), iv.stem));
    blk.args.push_back(carried.back());
    loop.results.push_back(b.named(b.new_value(iv.dtype, iv.layout, iv.is_ptr, iv.space), iv.stem));
  }
  gpu::Block* outer = b.block();
  b.set_block(&blk);
  std::vector<ValueId> yields = body(blk.args[0], carried);
  gpu::Op y;
  y.kind = gpu::GpuOpKind::YIELD;
  y.operands = std::move(yields);
  b.append(std::move(y));
  b.set_block(outer);
  std::vector<ValueId> results = loop.results;
  b.append(std::move(loop));
  return results;
}

}  // namespace metile::lowering
