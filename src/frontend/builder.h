/** \file builder.h
 * Builds a Tile IR program op by op, as the C API (and through it every language binding)
 * drives it. The builder does what a frontend would otherwise repeat: numpy-style promotion and
 * broadcasting (inserting explicit cast/broadcast ops), scoping of region values, sticky source
 * locations, and resolution of the SIMT thread count T. finish() verifies the program.
 */
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/tile_ir.h"
#include "ir/dot_precision.h"

namespace metile {

class Builder {
 public:
  explicit Builder(std::string name);

  void set_loc(const std::string& file, int line);
  void set_constexpr(const std::string& name, const std::string& value);
  void set_num_threads(int64_t n);

  ValueId param(const std::string& name, const Type& type);
  const Type& type(ValueId v) const;

  ValueId const_int(DType dtype, int64_t value);
  ValueId const_float(DType dtype, double value);
  ValueId grid(OpKind kind, int axis);
  ValueId arange(ValueId start, int64_t size);
  ValueId cast(ValueId x, DType dtype);
  ValueId bitcast(ValueId x, DType dtype);
  ValueId broadcast(ValueId x, Shape shape);
  ValueId reshape(ValueId x, Shape shape);
  ValueId unary(OpKind kind, ValueId x);
  ValueId binary(OpKind kind, ValueId x, ValueId y);
  ValueId select(ValueId cond, ValueId x, ValueId y);
  ValueId ptr_offset(ValueId ptr, ValueId offsets);
  ValueId load(ValueId ptrs, ValueId mask, ValueId other);
  void store(ValueId ptrs, ValueId value, ValueId mask);
  /** An atomic read-modify-write (kind: an ATOMIC_* op; `cmp` only for ATOMIC_CAS). */
  ValueId atomic(OpKind kind, ValueId ptrs, ValueId cmp, ValueId value, ValueId mask);
  ValueId tile_load(ValueId ptr, ValueId row, ValueId col, ValueId stride, Shape shape,
                    ValueId bound_rows, ValueId bound_cols);
  void tile_store(ValueId ptr, ValueId row, ValueId col, ValueId stride, ValueId value,
                  ValueId bound_rows, ValueId bound_cols);
  /** acc + a @ b; a precision other than device_default becomes the dot's input_precision. */
  ValueId dot(ValueId a, ValueId b, ValueId acc, DotPrecision precision = DotPrecision::device_default);
  ValueId reduce(OpKind kind, ValueId x, int axis);
  /** An inclusive scan (kind: CUMSUM or CUMPROD) along `axis`; bool counts as i32. */
  ValueId scan(OpKind kind, ValueId x, int axis, bool reverse);
  ValueId trans(ValueId x);
  /** Prints `values` from the kernel, each line led by `prefix` (checked text). */
  void device_print(const std::string& prefix, const std::vector<ValueId>& values);
  /** Returns the induction variable and the in-loop carried values. */
  std::pair<ValueId, std::vector<ValueId>> for_begin(ValueId start, ValueId end, ValueId step,
                                                     const std::vector<ValueId>& inits);
  std::vector<ValueId> for_end(const std::vector<ValueId>& yields);
  /** Structured `if` on a bool scalar: then ops follow if_begin, else ops follow if_else. */
  void if_begin(ValueId cond);
  void if_else(const std::vector<ValueId>& then_yields);
  /** Returns the if's results (none when there was no if_else). */
  std::vector<ValueId> if_end(const std::vector<ValueId>& else_yields);
  /** Structured `while`: returns the carried values inside the condition block. */
  std::vector<ValueId> while_begin(const std::vector<ValueId>& inits);
  /** Ends the condition block; returns the body's arguments (the passed values). */
  std::vector<ValueId> while_do(ValueId cond, const std::vector<ValueId>& passed);
  std::vector<ValueId> while_end(const std::vector<ValueId>& yields);
  void role_begin(int role, int num_roles, int first_sg, int num_sgs);
  void role_end();
  /** THREAD_ID / SIMD_LANE_ID (returns the value) or BARRIER (returns kNoValue). */
  ValueId simt(OpKind kind);
  ValueId simd(OpKind kind, ValueId x, ValueId lane_or_mask);
  ValueId shared(int64_t size, DType dtype);
  std::pair<ValueId, ValueId> tile_swizzle(ValueId pid_m, ValueId pid_n, std::string pattern,
                                           int block_size);

  /** Verifies and hands over the program; the builder is spent afterwards. */
  Program finish();

 private:
  template <typename... Args>
  [[noreturn]] void bad(OpKind kind, Args&&... parts) const;
  void check_open() const;
  void check_value(OpKind kind, ValueId v, const char* what) const;
  Block& current();
  /** Opens a region op (checks the nesting depth). */
  void open_region(Op op);
  void no_pointer(OpKind kind, ValueId v) const;
  /** Takes the values of a finished block out of scope. */
  void leave_block(const Block& b);
  /** Checks `yields` against `want` types (what names the op), for a yield closing a block. */
  std::vector<ValueId> check_yields(OpKind kind, const std::vector<ValueId>& yields,
                                    const std::vector<Type>& want, const char* what);
  void push_yield(std::vector<ValueId> values);
  /** Pops the innermost open op, appends it with results of `types` and returns them. */
  std::vector<ValueId> close_region(const std::vector<Type>& types);
  /** The innermost open op, which must be of `kind` with `regions` blocks open (else an error). */
  Op& open_op(OpKind kind, size_t regions, const char* call);
  /** Types, appends and returns the op's results; `declared` types ops that take one. */
  std::vector<ValueId> emit(OpKind kind, std::vector<ValueId> operands, std::vector<Attr> attrs,
                            const Type* declared = nullptr);
  ValueId emit1(OpKind kind, std::vector<ValueId> operands, std::vector<Attr> attrs = {},
                const Type* declared = nullptr);
  DType promote(const Type& a, const Type& b) const;
  /** promote() of two values: a scalar meeting a tile of its kind is weak (takes the tile's
   * dtype) when it is a float or an integer constant that fits; typed runtime integers promote
   * as numpy promotes typed scalars, so an i64 bound compared with an i32 tile compares in i64. */
  DType promote(ValueId x, ValueId y) const;
  Shape broadcast_shape(OpKind kind, const std::vector<ValueId>& vs) const;
  ValueId to_dtype(ValueId v, DType d);
  /** Equal types where a T dimension equals a concrete size; the first such match fixes T. */
  bool same_modulo_threads(const Type& a, const Type& b);
  ValueId to_shape(ValueId v, const Shape& s);

  Program p_;
  // For pointer tiles made by ptr_offset(scalar base, offsets): {base, offsets}, so a further
  // offset adds to the offsets instead of broadcasting pointers (which GPUs cannot move cheaply).
  std::unordered_map<ValueId, std::pair<ValueId, ValueId>> ptr_defs_;
  std::vector<Op> open_;  // region ops being built, innermost last
  std::vector<bool> in_scope_;
  std::unordered_map<ValueId, int64_t> int_consts_;  // values of const_int results
  std::unordered_map<ValueId, ValueId> trans_sources_;  // trans results -> their operands
  Loc loc_;
  int64_t threads_ = 0;
  bool threads_fixed_ = false;
  bool finished_ = false;
};

}  // namespace metile
