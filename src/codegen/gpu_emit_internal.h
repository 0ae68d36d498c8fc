/** \file gpu_emit_internal.h
 * The GPU IR walker shared by gpu_emit.cpp (analysis, statements, loops),
 * gpu_emit_memory.cpp (vector accesses, async copies, mma) and gpu_emit_control.cpp (if,
 * while): private to src/codegen.
 */
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/gpu_emit.h"

namespace metile::emit_detail {

using gpu::GpuOpKind;

bool is_identifier(const std::string& s);
bool is_number(const std::string& s);

class Emitter {
 public:
  Emitter(const gpu::Function& f, const GpuDialect& d) : f_(f), d_(d), c_(d.c) {}

  std::string run(KernelInterface* k);

 private:
  const gpu::Function& f_;
  const GpuDialect& d_;
  const Dialect& c_;
  SourceWriter w_;
  std::vector<std::string> name_;
  std::set<std::string> taken_;  // every identifier in use, for helper variables
  std::set<std::string> carried_names_;  // loop-carried variables (assigned more than once)
  std::vector<const gpu::Op*> def_;
  std::vector<const gpu::Block*> def_block_;
  std::vector<std::vector<const gpu::Op*>> users_;
  std::map<const gpu::Op*, int> unit_;
  std::map<const gpu::Op*, const gpu::Block*> block_of_;
  std::vector<bool> inline_, local_, geometry_, const_ptr_;
  std::vector<ValueId> in_place_;  // a loop's next carried value written straight into it
  std::vector<uint64_t> params_of_;  // pointers: bit i = derived from parameter i
  uint64_t written_params_ = 0;      // bit i: some store or atomic goes through parameter i
  std::string sep_;

  // ----- analysis -----
  void index(const gpu::Block& b, int& next_unit);
  int64_t op_regs(const gpu::Op& op) const;
  int effective_unit(const gpu::Op* user) const;
  const gpu::Op* effective_user(const gpu::Op* user) const;
  void find_in_place_updates(const gpu::Op& loop);
  void decide();
  void derive_params();

  // ----- spelling -----
  int64_t regs(ValueId v) const { return f_.regs(v); }
  DType dtype(ValueId v) const { return f_.value(v).dtype; }
  std::string type_of(ValueId v) const;
  std::string decl(ValueId v) const;
  std::string expr(ValueId v, const std::string& r) const;
  std::string spell(const gpu::Op& op, const std::string& r) const;
  std::string coord(gpu::LayoutId l, const std::string& tid, const std::string& r) const;
  std::string deref(ValueId ptr, const std::string& r) const;
  std::string combine(Reduction reduce, DType t, const std::string& a, const std::string& b) const;
  /** Integer +, -, * on launch geometry: spelled with plain operators. */
  bool index_op(const gpu::Op& op) const {
    bool arith = op.tile_op == OpKind::ADD || op.tile_op == OpKind::SUB || op.tile_op == OpKind::MUL;
    DType t = op.operands.empty() ? DType::invalid : dtype(op.operands[0]);
    return op.kind == GpuOpKind::ELEMENTWISE && arith && (t == DType::i32 || t == DType::i64) &&
           geometry_[op.result()];
  }

  // ----- statements -----
  void block(const gpu::Block& b);
  void statement(const gpu::Op& op, const std::string& r, bool in_loop);
  void group(const std::vector<const gpu::Op*>& ops, int64_t r);
  void standalone(const gpu::Op& op);
  void vector_access(const gpu::Op& op);
  void async_copy(const gpu::Op& op);
  void async_chunks(const gpu::Op& op, ValueId live, bool aligned, const std::string& pred = "");
  void mma(const gpu::Op& op);
  std::string fresh_name(const std::string& stem);
  void loop(const gpu::Op& op);
  void declare_vars(const std::vector<ValueId>& vs);
  /** if and while (uniform conditions: every thread takes the same path). */
  void branch(const gpu::Op& op);
  void while_loop(const gpu::Op& op);
  void warp_roles(const gpu::Op& op);
  /** A check of the host's stop word, every `every`-th time a thread gets here: the one place
   * every loop's back-edge check is spelled (insert-cancel-points puts the op there). */
  void cancel_point(int64_t every);
  void assign_all(const std::vector<ValueId>& dst, const std::vector<ValueId>& src);
  void print(const gpu::Op& op, const std::string& r);
  std::map<std::string, std::string> texts_;  // device_print text -> its array's name
};

}  // namespace metile::emit_detail
