/** \file gpu_ir.h
 * The GPU IR: a structured, per-thread SSA program for one threadgroup of `threads` threads
 * (simdgroups of the target's simd width). Every value is a per-thread register array of one
 * element type, annotated with a layout that says what the registers hold:
 *
 * - uniform: one register, the same value in every thread (scalars, program ids, parameters);
 * - thread:  one register that differs per thread but stands for no tile element (partial sums);
 * - a tile layout: register r of thread t holds element thr(t) + reg(r) of a Tile IR tile, in
 *   the row-major flattening of its shape; pairs past numel are padding and hold garbage.
 *
 * Per-register ops (elementwise, coord, valid, splat, load, store) act register by register.
 * Their operands either share the result's layout or are uniform/thread values, which stand
 * for the same value in every register. Control flow is structured and thread-uniform: `for`
 * bounds and `if` / `while` conditions are uniform, and per-element predicates are data
 * (operands of loads and stores), so barriers and simd operations never sit in divergent code.
 *
 * Ops (operands -> results; attributes in braces):
 *   const {value} -> uniform              builtin[Builtin] {axis} -> uniform or thread
 *   elementwise[OpKind](a, b, c) -> r     coord(tid) -> i32 element index   valid(tid) -> bool
 *   splat(x) -> r                         load(ptrs [, pred, other]) -> r
 *   store(ptrs, value [, pred])           vload/vstore: as load/store, {width} registers at a time
 *   atomic[op](ptrs, [cmp (cas),] value [, pred]) -> old values (0 where pred is false)
 *   alloc {shape, stages, layout [, offset]} -> threadgroup pointer (gpu::SharedArray)
 *   barrier [{device}: also orders device memory]
 *   shuffle_xor(x, mask)  shuffle(x, lane)  simd_reduce[op](x)  reg_reduce[op](x) -> thread
 *       (shuffle_xor also per register of a tile value: x of lane ^ mask, register by register)
 *   reg_reduce[op] {fold}(x) -> tile: register r of x folds into register fold[r] of the result
 *   reg_gather {from}(x) -> tile: register r is x's register from[r] (same thread)
 *       fold and from are register lists, "0,0,1,1" (register_list / parse_register_list)
 *   swizzle {pattern, block}(pid_m, pid_n, grid_m, grid_n) -> (m, n)
 *   for(start, end, step, inits...) -> carried; block args (iv, carried...), ends in yield
 *   if(cond) -> results: a uniform bool; a then and an else block (no args), each ending in a
 *       yield of the results
 *   while(inits...) -> passed: a before block (args: carried) ending in `yield cond, passed...`
 *       (cond a uniform bool) and an after block (args: passed) ending in a yield of the next
 *       carried values; the results are the passed values when cond is false
 *   print {head, label, rank}(pred, px, py, pz, i, j, value): where pred holds, one device_print
 *       line (src/codegen/prelude/device_print.h) per register: program (px, py, pz), element
 *       (i, j) of a rank-`rank` value (-1: the line has no value); head and label are its text
 *   mma {atom, m, n, k, lda, ldb, warps_m, warps_n, tf32}(a, b, acc, tid [, c]) -> acc'
 *       acc' = acc + A @ B for threadgroup arrays A (m x k, row stride lda) and B (k x n, row
 *       stride ldb); c: an f32 m x n threadgroup array for atoms whose accumulator passes
 *       through threadgroup memory (tensor_ops). acc and acc' share a
 *       fragment layout: warp w = wm + warps_m * wn owns rows [wm, wm+1) * m/warps_m and
 *       columns [wn, wn+1) * n/warps_n, covered by atoms (tm, tn); register
 *       v + values * (tm + TM * tn) is value v of atom (tm, tn) (see lower_dot.cpp).
 *       {ldmatrix} (mma.sync): fragments of 16-bit operands (tf32: A's) may be read with ldmatrix
 *       (rows 16-byte aligned; set by the ldmatrix-fragments pass, not by lowering).
 *       {register_a} (warpgroup atom): a is a 16-bit m x k register tile in the fragment layout of an
 *       m x k warpgroup accumulator over the same warpgroups (dot_choices.cpp), not an array.
 *   async_copy {width}(dst, src, lo, hi [, live] [, whole, base]): each register names a chunk of `width`
 *       consecutive elements starting at dst / src (threadgroup / device memory): elements
 *       [lo, hi) of the chunk are copied, the others become 0; registers whose `live` is false
 *       (padding) copy nothing. The dialect may copy asynchronously (cp.async, 16 bytes when
 *       the whole chunk is in bounds and aligned): the data is visible only after
 *       async_commit, async_wait and a barrier. dst chunks are aligned to the chunk size.
 *       {vector}: the dialect has vector types for the element type (a synchronous fallback
 *       may copy whole chunks with them). {whole}: two more operands (whole, base), uniform:
 *       when `whole` holds and `base` (the source buffer) is aligned to the chunk size, every
 *       chunk is in bounds and aligned, and lo / hi need not be looked at (the aligned body).
 *   convert_layout(x, scratch, tid) -> r: the tile x in r's layout (same dtype and element
 *       count), where two uses of a tile disagree on its layout. scratch: a threadgroup array of
 *       x's dtype with room for the tile; tid: the thread index. The lower-convert-layout pass
 *       replaces it with stores, a barrier, loads and a barrier (emitters never see it).
 *   cancel_point {every}: a loop back-edge. Each thread counts the times it gets there; every
 *       `every`-th time (a power of two) the kernel reads the stop word the host may set while
 *       it runs (parameters the dialect adds after the others) and, when it is set, the
 *       launch stops (docs/semantics.md, "Stopping a launch"). Threads of a threadgroup reach
 *       it together (loops are thread-uniform), so a dialect may synchronize there. A dialect
 *       may also read the word when the program starts and act on the value it read last at
 *       every back-edge (cuda), so the first turn stops a program started after a stop and
 *       no check waits for a read. every=0: the program's entry check, once, at top level
 *       before its first write; it acts on the word as it was when the program started.
 *   mbar_wait(bar, parity [, tid, pred]): waits until the phase of that parity of the mbarrier
 *       `bar` completed (every thread; with tid and pred: only thread 0, and only where the
 *       uniform bool pred holds).
 *   mbar_arrive(bar, lane [, pred]): each thread whose `lane` (its simd lane) is 0 arrives once on
 *       the mbarrier `bar`, where the uniform bool pred holds: one arrival per simdgroup, made
 *       after everything the simdgroup did before it (release_stages.cpp).
 *   warp_specialize {producers}: a producer and a consumer block (no arguments, each ending in
 *       an empty yield), at top level, once. The launch runs `producers` threads (whole
 *       warpgroups) beyond `threads`: thread indices threads.. run the producer block, the
 *       function's `threads` (whom every layout covers) the consumer block; neither runs what
 *       the other does, so each block's control flow is uniform over its own threads only, and
 *       a barrier inside a block is its role's named barrier (role_barrier). The ops before it
 *       run on every thread: pure ones and thread 0's (mbar_init, tma_load) only, plus
 *       barriers (specialize_warps.cpp).
 *   setmaxnreg {count, inc}: the warpgroup's threads lower (inc=0) or raise (inc=1) their register
 *       limit to `count` (24..256, a multiple of 8); first in a warp_specialize block.
 *   barrier {id, threads}: a named barrier that `threads` threads (a multiple of the simd width)
 *       of one warp_specialize role take part in; without them, the whole threadgroup's.
 *   async_commit: the copies issued since the last commit form a group.
 *   async_wait {pending}: waits until at most `pending` groups are still in flight (own thread).
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/layout.h"
#include "ir/ops.h"
#include "ir/reduction.h"
#include "ir/tile_ir.h"
#include "ir/types.h"
#include "ir/walk.h"

namespace metile::gpu {

enum class GpuOpKind : uint8_t {
#define GPU_OP(E, name, traits) E,
#include "ir/gpu_ops.def"
};

enum GpuTrait : uint32_t {
  kGPure = 1u << 0,         // no side effects and no memory reads: CSE-able, removable
  kGRead = 1u << 1,         // reads (or allocates) memory: removable when unused, never merged
  kGWrite = 1u << 2,        // writes memory or synchronizes: never removed or merged
  kGPerRegister = 1u << 4,  // acts register by register on operands of one layout
  kGRegion = 1u << 5,
  kGTerminator = 1u << 6,
};

std::string_view gpu_op_name(GpuOpKind k);
uint32_t gpu_op_traits(GpuOpKind k);
inline bool has_gpu_trait(GpuOpKind k, uint32_t t) { return (gpu_op_traits(k) & t) != 0; }

/**
 * What a BUILTIN op reads, each an i32. The group ones are uniform and take an axis (x, y, z);
 * the others differ per thread and have one register.
 */
enum class Builtin : uint8_t {
  thread_index,           // within the threadgroup
  simd_lane,              // within the simdgroup
  simdgroup_index,        // within the threadgroup
  threadgroup_position,   // program id, per axis
  threadgroups_per_grid,  // number of programs, per axis
};
inline constexpr int kBuiltinCount = 5;
/** "thread_index", ... (the printer; a dialect's table pairs each builtin with its spelling). */
std::string_view builtin_name(Builtin b);
/** threadgroup_position and threadgroups_per_grid: the same in every thread of a group. */
inline bool is_group_builtin(Builtin b) {
  return b == Builtin::threadgroup_position || b == Builtin::threadgroups_per_grid;
}

/** Blocks a region op owns: two for IF (then, else) and WHILE (before, after), one for FOR. */
inline size_t gpu_regions(GpuOpKind k) {
  if (!has_gpu_trait(k, kGRegion)) return 0;
  return k == GpuOpKind::IF || k == GpuOpKind::WHILE || k == GpuOpKind::WARP_SPECIALIZE ? 2 : 1;
}

using LayoutId = uint32_t;
inline constexpr LayoutId kUniform = 0;
inline constexpr LayoutId kThread = 1;

/**
 * Which element of a tile each (thread, register) pair holds: element(t, r) = thr(t) + reg(r),
 * a linear index into the tile's row-major flattening; indices >= numel are padding. thr and
 * reg are CuTe layouts (src/ir/layout.h), kept coalesced so that equal maps compare equal. A
 * layout depends on the element count only, not on the tile's shape, so a reshape that keeps
 * the mapping moves no data; lowering derives rows and columns from the index where it needs
 * them.
 */
struct Layout {
  enum class Kind : uint8_t { uniform, thread, tile };
  Kind kind = Kind::uniform;
  int64_t numel = 0;     // tiles: the element count
  metile::Layout thr;    // over the thread index; covers the whole threadgroup
  metile::Layout reg;    // over the register index
  bool padded = false;   // some pair is padding (set by Function::add_layout)

  bool is_tile() const { return kind == Kind::tile; }
  int64_t regs() const { return is_tile() ? reg.size() : 1; }
  int64_t element(int64_t t, int64_t r) const { return thr(t) + reg(r); }
  bool operator==(const Layout& o) const {
    return kind == o.kind && numel == o.numel && thr == o.thr && reg == o.reg;
  }
  /** "tile<1024> thr=256:4 reg=(4,2):(1,1024)". */
  std::string str() const;
};

/** "0,0,1,1": the text form of a list of register indices (attributes fold, from). */
std::string register_list(const std::vector<int64_t>& regs);
/** The list register_list wrote; METILE_ERROR_INVALID_PROGRAM naming `what` for other text. */
std::vector<int64_t> parse_register_list(const std::string& text, std::string_view what);

/** A tile layout of `numel` elements (coalesces the two maps). */
Layout tile_layout(int64_t numel, metile::Layout thr, metile::Layout reg);

struct Value {
  DType dtype = DType::invalid;  // element type; the pointee type for pointers
  bool is_ptr = false;
  AddrSpace space = AddrSpace::device;
  LayoutId layout = kUniform;
  std::string stem;  // readable name stem ("x", "mask"); made unique by name_values()
};

struct Op;

struct Block {
  std::vector<ValueId> args;
  std::vector<Op> ops;
};

struct Op {
  GpuOpKind kind{};
  OpKind tile_op{};    // ELEMENTWISE, ATOMIC: the Tile IR op applied per register
  Reduction reduce{};  // SIMD_REDUCE, REG_REDUCE: what the lanes or registers fold with
  Builtin builtin{};   // BUILTIN: what it reads (its axis is the "axis" attribute)
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  std::vector<Attr> attrs;
  std::vector<Block> regions;
  Loc loc;  // of the Tile IR op it came from

  ValueId result() const { return results.empty() ? kNoValue : results[0]; }
  const AttrValue* find_attr(std::string_view name) const;
  int64_t attr_int(std::string_view name) const;
  double attr_num(std::string_view name) const;
  const std::string& attr_str(std::string_view name) const;
  void set_attr(std::string_view name, AttrValue v);
  Block& body() { return regions.at(0); }
  const Block& body() const { return regions.at(0); }
};

struct GpuParam {
  std::string name;
  ValueId value = kNoValue;
};

/** The register limits a function may name (besides 0): what ptxas accepts for a thread. */
constexpr int kMinMaxRegisters = 16, kMaxMaxRegisters = 255;

struct Function {
  std::string name;
  std::vector<GpuParam> params;  // in Tile IR parameter order
  std::vector<Value> values{Value{}};
  std::vector<Layout> layouts;   // [kUniform], [kThread], tile layouts
  Block body;
  int threads = 0;  // threadgroup size
  int simd_width = 32;
  int max_registers = 0;  // a thread's register limit on cuda (CompileOptions; 0: none named)

  Function();
  ValueId new_value(Value v);
  const Value& value(ValueId v) const { return values.at(v); }
  Value& value(ValueId v) { return values.at(v); }
  /** Returns the id of an equal layout, adding it first if needed (computes `padded`). */
  LayoutId add_layout(Layout l);
  const Layout& layout(LayoutId id) const { return layouts.at(id); }
  const Layout& layout_of(ValueId v) const { return layouts.at(value(v).layout); }
  int64_t regs(ValueId v) const { return layout_of(v).regs(); }
};

using metile::walk;  // ir/walk.h serves both IRs
using metile::walk_mut;
using metile::erase_ops_if;

/** Number of uses of each value, indexed by ValueId. */
std::vector<int> use_counts(const Function& f);

/** For each value, bit i: a pointer that may point into parameter i (ir/pointer_provenance.h). */
std::vector<uint64_t> param_masks(const Function& f);
/**
 * For each value, bit i: a pointer that may point into the i-th threadgroup array (alloc op, in
 * the body's order). As param_masks: from the 64th array
 * on, every bit; 0 for a threadgroup pointer means its array is not known (an if's or while's
 * result), so a caller that must be safe counts it as every array.
 */
std::vector<uint64_t> array_masks(const Function& f);

/**
 * Unique identifiers for every value: parameters keep their names, others get their stem
 * plus a number where needed. `reserved` names (language keywords, builtins) are avoided.
 */
std::vector<std::string> name_values(const Function& f, const std::vector<std::string>& reserved);

/** Human-readable text (METILE_DEBUG=gpu_ir). */
std::string print(const Function& f);

/**
 * Checks structure, typing and layouts; throws METILE_ERROR_INTERNAL naming the op, since an
 * ill-formed GPU IR function is a compiler bug.
 */
void verify(const Function& f);
/** The same; on failure *failed is the op that failed (nullptr: the function as a whole). */
void verify(const Function& f, const Op** failed);

/** Threads a launch of `f` runs: its threads, plus a warp_specialize op's producers. */
int launch_threads(const Function& f);
/**
 * A barrier of the threads running block `role` of the warp_specialize op `specialize` (0: the
 * producers, 1: the consumers) and no others: named barrier 1 for the consumers, 2 for the
 * producers (0 stays the whole threadgroup's).
 */
Op role_barrier(const Function& f, const Op& specialize, size_t role);

/**
 * The block whose end is `op`'s loop back-edge (a for's body, a while's after block), or
 * nullptr for an op that does not loop. insert-cancel-points puts a cancel_point there: a new loop op gets its row here.
 */
Block* loop_back_edge(Op& op);

/**
 * What a threadgroup array (an alloc op) holds: `stages` copies of a `shape` array of the
 * result's dtype, each stored as `layout` says, and where it sits. Attributes:
 *   shape="64x32"   the logical array of one stage (rows x columns, or one extent);
 *   stages=3        copies one after another (a K loop's pipeline ring; 1 otherwise);
 *   layout="..."    linear: row-major, dense;
 *                   padN: row-major with N unused elements after each row (the padding that
 *                     spreads a staged operand's rows over the banks);
 *                   swizzleS: the S-byte swizzle (128, 64 or 32; target/swizzled_tile.h) the
 *                     warpgroup atoms read and TMA writes: blocks of S bytes of each row, 16-byte chunks XORed
 *                     by row; aligned to 1024 bytes (the 128-byte swizzle's 8-row atom);
 *   offset=4096     bytes from the start of the threadgroup's memory, set by the
 *                   allocate-threadgroup-memory pass (absent before it runs);
 *   row=1           a kept row (keep_rows): written only by its copy loop, read only where that
 *                   loop wrote, never cleared (copy-rows-async issues its copies).
 */
struct SharedArray {
  enum class Layout : uint8_t { linear, pad, swizzle };
  std::vector<int64_t> shape;
  int64_t stages = 1;
  Layout layout = Layout::linear;
  int64_t layout_arg = 0;  // pad: elements after each row; swizzle: bytes per block row
  int64_t offset = -1;     // -1: not placed yet

  static SharedArray linear(std::vector<int64_t> shape, int64_t stages = 1) { return padded(std::move(shape), 0, stages); }
  /** Rows padded by `pad` elements (linear for 0). */
  static SharedArray padded(std::vector<int64_t> shape, int64_t pad, int64_t stages = 1);
  /** Rows cut into `swizzle`-byte blocks whose 16-byte chunks are XORed by row (swizzleS). */
  static SharedArray swizzled(std::vector<int64_t> shape, int64_t swizzle, int64_t stages = 1);
  /** Elements one stage occupies, padding included; all stages: stages * stage_elements(). */
  int64_t stage_elements() const;
  uint64_t bytes(DType dtype) const { return static_cast<uint64_t>(stages * stage_elements()) * dtype_size(dtype); }
  uint64_t alignment() const { return layout == Layout::swizzle ? 1024 : 16; }
  /** "linear", "pad8", "swizzle128". */
  std::string layout_name() const;
  /** Sets the alloc's shape, stages, layout and (when placed) offset attributes. */
  void write(Op& alloc) const;
};
/** The array an alloc describes; *why (when given) says what is wrong, else it throws. */
SharedArray shared_array(const Function& f, const Op& alloc, std::string* why = nullptr);

/**
 * Threadgroup memory the function uses, in bytes: the end of its highest array, a multiple of
 * 16 (the arrays' offsets come from the allocate-threadgroup-memory pass).
 */
uint64_t threadgroup_bytes(const Function& f);

/**
 * Appends ops to a block, typing results: the way lowering and passes create GPU IR.
 * Per-register results take the layout of their tile operands (or thread, or uniform).
 */
class GpuBuilder {
 public:
  GpuBuilder(Function& f, Block* block) : f_(f), block_(block) {}

  Function& function() { return f_; }
  Block* block() const { return block_; }
  void set_block(Block* b) { block_ = b; }
  void set_loc(Loc loc) { loc_ = loc; }
  Loc loc() const { return loc_; }

  ValueId constant_int(DType d, int64_t v);
  ValueId constant_float(DType d, double v);
  ValueId builtin(Builtin which, int axis, LayoutId layout);
  /** An element-wise op; `dtype` is the result type for casts (ignored otherwise). */
  ValueId ew(OpKind k, std::vector<ValueId> operands, DType cast_to = DType::invalid);
  /** Element index of each register of `layout` (tid: the thread_index builtin). */
  ValueId coord(LayoutId layout, ValueId tid);
  /** Whether each register of `layout` holds an element (not padding). */
  ValueId valid(LayoutId layout, ValueId tid);
  ValueId splat(ValueId x, LayoutId layout);
  /** Loads through `ptrs`; when pred is set, registers whose predicate is false read `other`. */
  ValueId load(ValueId ptrs, ValueId pred = kNoValue, ValueId other = kNoValue);
  void store(ValueId ptrs, ValueId value, ValueId pred = kNoValue);
  /** Atomic `k` (a Tile IR ATOMIC_* op) per register; cmp only for ATOMIC_CAS. */
  ValueId atomic(OpKind k, ValueId ptrs, ValueId cmp, ValueId value, ValueId pred = kNoValue);
  /** A threadgroup array of `d` (an alloc op at the builder's block). */
  ValueId alloc(DType d, const SharedArray& array, const std::string& stem);
  void barrier();
  ValueId shuffle_xor(ValueId x, ValueId mask);
  ValueId shuffle(ValueId x, ValueId lane);
  /** `uniform`: the whole threadgroup is one simdgroup, so every thread gets the same result.
   * `lanes` (a power of two below the simd width; 0: all): x repeats every `lanes` lanes, so the
   * fold runs over each aligned group of that many lanes (attribute "lanes"). */
  ValueId simd_reduce(Reduction reduce, ValueId x, bool uniform = false, int64_t lanes = 0);
  ValueId reg_reduce(Reduction reduce, ValueId x);
  /** Folds x's registers into the registers of a value in tile layout `out`: register r of x
   * goes into register fold[r] (attribute "fold", a register list). */
  ValueId reg_fold(Reduction reduce, ValueId x, LayoutId out, const std::vector<int64_t>& fold);
  /** Register r of the result (tile layout `out`) is register from[r] of x, in the same thread
   * (attribute "from", a register list). */
  ValueId reg_gather(ValueId x, LayoutId out, const std::vector<int64_t>& from);
  /** One device_print line per register of `value` where `pred` holds (see print above). */
  void print(ValueId pred, const std::vector<ValueId>& pid, ValueId i, ValueId j, ValueId value,
             const std::string& head, const std::string& label, int64_t rank);
  /** Appends a prepared op (loops, swizzles) with the builder's location; returns it. */
  Op& append(Op op);
  /** Gives `v` a readable stem (no effect on semantics); returns v. */
  ValueId named(ValueId v, const std::string& stem);

  /** The layout element-wise ops on these operands produce. */
  LayoutId join(const std::vector<ValueId>& operands) const;
  ValueId new_value(DType d, LayoutId layout, bool is_ptr = false,
                    AddrSpace space = AddrSpace::device);

 private:
  Function& f_;
  Block* block_;
  Loc loc_;
};

}  // namespace metile::gpu
