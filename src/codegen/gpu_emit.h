/** \file gpu_emit.h
 * Emits GPU IR as C-family GPU source (MSL today, CUDA C++ next) on the shared c_like core. The
 * walker here is target-neutral; a GpuDialect supplies what differs between GPU languages: the
 * kernel's parameter list, builtins, address spaces, barriers, simd functions, vector types.
 *
 * Shape of the output. Consecutive per-register ops with the same register count form one
 * `for (int r = 0; r < R; ++r)` loop (unrolled); a value used only inside its loop is a local
 * there, one used elsewhere is an array `T name[R]`. A pure value with a single use in the same
 * loop (or straight-line block) is spelled inline in its user, so index math and address
 * arithmetic read as expressions (`X[row_start + offs[r]]`). Constants are literals.
 */
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "codegen/c_like.h"
#include "ir/gpu_ir.h"
#include "support/error.h"
#include "target/matrix_atom.h"

namespace metile {

/** What a kernel's entry point receives, as the emitter decided it. */
struct KernelInterface {
  struct Param {
    std::string name;  // identifier in the generated source
    DType dtype = DType::invalid;
    bool is_ptr = false;
    bool written = false;  // pointers: some store goes through it
  };
  struct Shared {
    std::string name;
    DType dtype = DType::invalid;
    int64_t size = 0;    // elements, all stages and padding included
    int64_t offset = -1;  // bytes into the threadgroup's memory (allocate-threadgroup-memory)
  };
  std::string name;
  std::vector<Param> params;   // in Tile IR order
  std::vector<Shared> shared;  // threadgroup arrays, in allocation order
  std::set<gpu::Builtin> builtins;  // the builtins the kernel reads
  int threads = 0;
  int64_t accumulator_registers = 0;  // the largest mma accumulator a thread holds (0: none)
  int64_t loop_registers = 0;  // live through the busiest loop (register_budget.h; 0: no loop)
  int max_registers = 0;  // the user's limit a thread (gpu::Function::max_registers; 0: none)
  /** The kernel has warp roles (warp_specialize): one block a multiprocessor, whose registers at
   * launch the roles' setmaxnreg share out. */
  bool warp_roles = false;
  /** TMA tensor maps (src/target/tma.h texts) by index: kernel parameters after `params`. */
  std::vector<std::string> tensor_maps;
  /** The kernel has cancel_points: it takes the host's stop word `mt_cancel` (a pointer to a
   * u32) after every other parameter (cuda: and the word's copy in GPU memory, `mt_stop`). */
  bool cancel = false;
};

/**
 * One GPU IR `mma` op as the dialect spells it (see gpu_ir.h): `acc` is a register array of
 * the accumulator fragment layout, updated in place with A @ B from the threadgroup arrays.
 */
struct MmaSpec {
  AtomKind atom{};             // the kind its "atom" attribute names (matrix_atoms.def)
  std::string a, b, acc, tid;  // identifiers (tid: the thread index)
  std::string c;               // the accumulator's threadgroup array, "" when the atom has none
  DType ab = DType::invalid;   // the element type of a and b (warpgroup FP8: of a)
  DType bt = DType::invalid;   // the element type of b (differs from ab in e4m3 x e5m2 dots)
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  int64_t atom_m = 0, atom_n = 0, atom_k = 0, warps_m = 0, warps_n = 0;
  bool tf32 = false;
  bool tf32x3 = false;         // mma.sync tf32: three MMAs on TF32 hi/lo parts (hi*hi + hi*lo + lo*hi)
  bool ldmatrix = false;       // 16-bit fragments may be read with ldmatrix (the ldmatrix-fragments pass)
  bool preload = false;        // mma.sync: read the next k step's fragments before this step's mmas
  bool serpentine = false;     // mma.sync: odd atom rows walk the columns backwards
  bool b_kmajor = false;       // b holds B transposed, n rows of k (mma.sync: ldmatrix without .trans; warpgroup: K-major)
  bool wait = true;            // warpgroup: wait for the instructions before the op ends (else a later warpgroup_sync)
  bool transposed = false;     // warpgroup tf32: C^T = B^T A^T with B^T from registers (the CUDA emitter's tf32 form)
  int64_t promote = 0;         // warpgroup FP8: k between promotions of the partial sums (0: fast accumulation)
  /** warpgroup register A (f16/bf16): the 16-bit expression of each register of A's tile, in the
   * m x k accumulator fragment order (dot_choices.cpp); empty: a is an array. */
  std::vector<std::string> a_regs;
  int64_t tiles_m() const { return m / warps_m / atom_m; }  // atoms per warp down
  int64_t tiles_n() const { return n / warps_n / atom_n; }  // atoms per warp across
};

/** What a kernel needs from its dialect's prelude (GpuDialect::prelude). */
struct PreludeUses {
  bool swizzle = false;      // tile_swizzle
  bool tma = false;          // TMA copies
  bool tma_3d = false;       // 3-D TMA copies (TmaMap::slabs)
  bool float8 = false;       // FP8 values (the conversions of src/support/float8.h)
  bool cancel = false;       // cancel points
  std::set<AtomKind> atoms;  // the kinds of its mma ops
};

/** The differences between GPU languages; see msl.cpp. */
class GpuDialect {
 public:
  explicit GpuDialect(const Dialect& c) : c(c) {}
  virtual ~GpuDialect() = default;
  const Dialect& c;

  /** Identifiers generated names must avoid (functions and parameters the dialect uses). */
  virtual std::vector<std::string> reserved() const = 0;
  /** Text before the kernel (headers, helper functions) with what `uses` says the kernel needs. */
  virtual std::string prelude(const PreludeUses& uses) const = 0;
  /** Writes the entry point's head and opens its body. */
  virtual void open_kernel(SourceWriter& w, const KernelInterface& k) const = 0;
  /** An i32 expression for a builtin (axis: x, y, z of the group builtins). */
  virtual std::string builtin(gpu::Builtin which, int axis) const = 0;
  /** Pointer type to `dtype` elements in `space`. */
  virtual std::string pointer(DType dtype, AddrSpace space, bool is_const) const = 0;
  virtual std::string barrier(bool device_memory) const = 0;
  /** A barrier that orders device memory among the group's threads only (attribute memory). */
  virtual std::string group_memory_barrier() const { return barrier(true); }
  /** Barrier `id` of `threads` threads, the named barrier of one warp role (gpu_ir.h,
   * warp_specialize), ordering device memory too where `device_memory`; "" where the dialect
   * has none. */
  virtual std::string named_barrier(int64_t /*id*/, int64_t /*threads*/, bool /*device_memory*/) const { return ""; }
  /** Lowers (inc false) or raises a warpgroup's register limit a thread to `count`; "" where the
   * dialect cannot, which then runs a warp_specialize op without it. */
  virtual std::string set_max_registers(int64_t /*count*/, bool /*inc*/) const { return ""; }
  /** Makes this thread's device-memory writes visible to asynchronous (TMA) copies; "" where
   * the dialect has none. Emitted before a barrier that carries the async_proxy attribute. */
  virtual std::string async_proxy_fence() const { return ""; }
  /** x of lane ^ lane_or_mask (xor) or of lane lane_or_mask; both i32 expressions. */
  virtual std::string shuffle(bool xor_mask, DType dtype, const std::string& x,
                              const std::string& lane_or_mask) const = 0;
  /** A whole-simdgroup reduction, or "" when the emitter should use a shuffle_xor tree. */
  virtual std::string simd_reduce(Reduction reduce, DType dtype, const std::string& x) const = 0;
  /** The vector type loaded/stored `width` elements at a time, and its pointer type. */
  virtual std::string vector_type(DType dtype, int64_t width) const = 0;
  virtual std::string vector_pointer(DType dtype, int64_t width, AddrSpace space,
                                     bool is_const) const = 0;
  /** A condition that `ptr` suits a `bytes`-wide vector access, or "" when any address does. */
  virtual std::string vector_aligned(const std::string& ptr, int64_t bytes) const = 0;
  /**
   * Whether a vector load of several tested chunks (bounds or alignment) tests them all at once
   * and loads every chunk in one branch, testing chunk by chunk only where that fails. With a
   * branch per chunk, each branch ends with its chunk's elements converted from the loaded vector,
   * and on cuda the first use of a load's register waits for the load: the chunks were fetched one
   * after another. In one branch they are all in flight before the first conversion waits.
   */
  virtual bool vector_loads_in_flight() const { return false; }
  /**
   * A statement starting an asynchronous copy of `bytes` bytes from device address `src` to
   * threadgroup address `dst` (both aligned to `bytes`), or "" when the language has none: the
   * emitter then copies element by element (gpu_ir.h, async_copy).
   */
  virtual std::string async_copy(const std::string&, const std::string&, int64_t) const { return ""; }
  /**
   * The same copy issued only where the boolean `pred` holds, without a branch (a predicated
   * instruction), or "" when the language has none: the aligned body then branches on its test.
   */
  virtual std::string async_copy_if(const std::string&, const std::string&, int64_t, const std::string&) const {
    return "";
  }
  /**
   * pending < 0: a statement closing the group of copies issued so far; else one waiting until
   * at most `pending` groups are in flight. "" where copies are synchronous.
   */
  virtual std::string async_sync(int64_t) const { return ""; }
  /** A statement waiting for the warpgroup's outstanding MMA groups, then ordering this
   * thread's threadgroup writes before the async proxy reads them (the next warpgroup operands);
   * "" where the dialect has no warpgroup atoms. */
  virtual std::string warpgroup_sync() const { return ""; }
  /** Writes statements for one `mma` op (identifiers it declares start with mma_). */
  virtual void mma(SourceWriter& w, const MmaSpec& s) const = 0;
  /**
   * Writes the statements of one op of the tensor-memory-accelerator family (gpu_ir.h:
   * mbar_init, tma_load, mbar_wait, mbar_arrive, warpgroup_wait, opaque), which lowering makes only for targets
   * with warpgroup atoms: `operands` are its operands' expressions (register 0), `element` the
   * element type of its first operand, `result` its result's name ("" without one). The
   * emitter reaching it in a dialect without such ops is a bug.
   */
  virtual void tma(SourceWriter&, const gpu::Op& op, const std::vector<std::string>&, DType,
                   const std::string&) const {
    METILE_ASSERT(false, "gpu_emit: ", gpu_op_name(op.kind), " in a dialect without TMA");
  }
  /**
   * A file-scope constant array named `name` holding the bytes of `text` and a terminating 0:
   * user text (device_print's prefix) enters the source as numbers, never as a literal.
   */
  virtual std::string text_array(const std::string& name, const std::string& text) const = 0;
  /** Defines metile_device_print (src/codegen/prelude/device_print.h) for this language. */
  virtual std::string print_prelude() const = 0;
  /**
   * The statements opening a kernel that checks the host's stop word (KernelInterface::cancel):
   * the per-thread counter `mt_polls` and whatever the check needs; "" where the dialect cannot
   * stop a kernel (the emitter then refuses a cancel_point).
   */
  virtual std::string cancel_prologue() const { return ""; }
  /** The statement of a cancel_point: once every `every` times (a power of two; the dialect
   * picks which; 0: the entry check, once) it reads the stop word `mt_cancel` and, when the
   * host set it, stops the launch (gpu_ir.h, cancel_point). */
  virtual std::string cancel_check(int64_t) const { return ""; }
  /** Marks a loop over registers for full unrolling. */
  virtual std::string unroll() const { return "#pragma unroll"; }
};

/** s without one pair of enclosing parentheses (when they enclose all of it). */
std::string strip_parens(const std::string& s);

/**
 * Writes the kernel for `f` (verified GPU IR) and fills `iface`. Throws METILE_ERROR_INTERNAL
 * for IR the walker cannot spell (a bug), never for user programs.
 */
std::string emit_gpu_kernel(const gpu::Function& f, const GpuDialect& d, KernelInterface* iface);

}  // namespace metile
