/** \file cpu_cpp_emitter.h
 * The emitter behind generate_cpu_cpp (cpu_cpp.h), shared by its three files:
 *   cpu_cpp.cpp           the translation unit: prelude, per-instance function, entry point;
 *   cpu_cpp_elements.cpp  element expressions (an op's value at one element) and the loop nests;
 *   cpu_cpp_ops.cpp       one emit rule per op that writes statements (stores, reductions, loops).
 * Internal to src/codegen.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpu_cpp.h"
#include "codegen/cpu_plan.h"

namespace metile::cpu_cpp {

// An element index: i0 for 1-D tiles, (i0, i1) for 2-D ones; empty for scalars.
struct Idx {
  std::string i0, i1;
  std::string key() const { return i0 + "," + i1; }
};

struct CpuEmitter {
  const CpuPlan& plan;
  const Program& p;
  const Dialect& d = cpu_dialect();
  SourceWriter w;
  // Inline values already written in the current loop body, by (value, index).
  std::map<std::pair<ValueId, std::string>, std::string> memo;
  Idx canonical;
  int fresh = 0;
  // Inside a simdgroup_role region: T-element stores are limited to threads [lo, hi).
  int64_t role_lo = -1, role_hi = -1;
  DefiningOps<Block> defs;
  std::map<const Op*, uint32_t> loop_sites;  // for op -> its fault code
  // The ops after the one being emitted in its block (for fusing reductions into its loop).
  std::vector<const Op*> rest;
  std::set<const Op*> fused;
  // Some store may bypass the cache (see emit_store): the entry point then ends with a fence.
  bool streams = false;
  bool atomics = false;  // the program has atomics: no store bypasses the cache

  explicit CpuEmitter(const CpuPlan& pl) : plan(pl), p(pl.program) {}

  const Type& type(ValueId v) const { return p.type(v); }
  const std::string& name(ValueId v) const { return plan[v].name; }
  const Op* def_op(ValueId v) const { return defs.at(v); }
  bool owns_storage(ValueId v) const { return plan[v].storage == v; }

  // ---- the translation unit (cpu_cpp.cpp) -------------------------------------------------
  CpuSource run();
  std::string param_decl(const Param& prm, bool storage) const;
  std::string entry_arg(const Param& prm) const;
  void declare_shared_memory();
  std::string describe(const Op& op) const;
  [[noreturn]] void unsupported(const Op& op, const std::string& why) const;

  // ---- element expressions and loops (cpu_cpp_elements.cpp) ------------------------------
  std::string ctype(const Type& t) const;
  std::string decl(const Type& t, const std::string& n) const;
  static std::string flat(const Shape& s, const Idx& idx);
  std::string elem(ValueId v, const Idx& idx);
  static bool same_index_operands(OpKind k);
  void emit_operands_first(const Op& root, const Idx& idx);
  Idx broadcast_idx(const Shape& from, const Shape& to, const Idx& idx) const;
  bool is_const_zero(ValueId v) const;
  std::string offset_of(ValueId v, const Idx& idx);
  std::string op_elem(const Op& op, const Idx& idx);
  std::string lane_elem(const Op& op, const std::string& j);
  std::string tile_elem(const Op& op, const Idx& idx);
  void for_each(const Shape& s, const std::function<void(const Idx&)>& body,
                const std::string& clause = {});
  void declare_array(ValueId v);
  void fill_array(ValueId target, ValueId source);

  // ---- ops that write statements (cpu_cpp_ops.cpp) ---------------------------------------
  void emit_block(const Block& b);
  void emit_op(const Op& op);
  std::vector<const Op*> fusable_reductions(const Op& op, std::vector<const Op*> rest) const;
  bool reads_only(ValueId x, ValueId v, const std::set<ValueId>& later) const;
  std::string role_guard(const Type& t, const Idx& idx) const;
  void emit_store(const Op& op);
  void emit_store_loop(const Op& op, const std::function<void(const Idx&)>& body);
  // A compare that holds for the whole tile when it holds at both ends (cpu_cpp_uniform.cpp).
  struct UniformLeaf {
    ValueId leaf, stepping;
    int64_t step;
  };
  std::vector<UniformLeaf> uniform_leaves(const Op& store) const;
  std::string uniform_condition(const std::vector<UniformLeaf>& leaves, int64_t n);
  std::optional<int64_t> stride(ValueId v) const;
  bool streamable(const Op& store) const;
  void emit_streamed_store(const Op& op, const std::function<void(const Idx&)>& body);
  void emit_atomic(const Op& op);
  void emit_tile_store(const Op& op);
  void emit_tile_load_rows(const Op& op);
  void emit_dot(const Op& op);
  // How one reduction folds: its accumulator, identity, omp clause, step and result.
  struct Fold {
    std::string acc_type, init, clause;
    std::function<std::string(const std::string&, const std::string&)> step;
    std::function<std::string(const std::string&)> finish;
  };
  Fold fold(const Op& op) const;
  void emit_reduce(const Op& op);
  void emit_shared(const Op& op);
  void emit_swizzle(const Op& op);
  void emit_scan(const Op& op);
  void emit_print(const Op& op);
  void emit_role(const Op& op);
  void emit_for(const Op& op);
  void emit_yield(const Op& loop);
  /** dst = src "at once" (a source that is also a destination is copied aside first). */
  void assign(const std::vector<ValueId>& dst, const std::vector<ValueId>& src);
  /** Variables for an if's results or a while's carried and passed values (assigned later). */
  void declare_vars(const std::vector<ValueId>& vs);
  /** Run-time if / while on a program-uniform scalar condition. */
  void emit_if(const Op& op);
  void emit_while(const Op& op);
};

}  // namespace metile::cpu_cpp
