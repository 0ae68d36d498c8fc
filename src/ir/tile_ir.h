/** \file tile_ir.h
 * The Tile IR: a Program owns a value table and a body Block; a Block is a list of Ops and its
 * arguments; an Op has a kind (ops.def), operand and result value ids, attributes, an optional
 * region (one Block) and a source location. One generic node for every op keeps passes and
 * backends free of per-op visitor boilerplate.
 *
 * Region ops:
 *   for:            operands (start, end, step, init...), results (carried out...);
 *                   block args (iv, carried...); the block ends with `yield` of the next values.
 *   simdgroup_role: no operands or results; block without args, no terminator.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/ops.h"
#include "ir/types.h"
#include "ir/walk.h"

namespace metile {

using ValueId = uint32_t;  // 0 = none
inline constexpr ValueId kNoValue = 0;

using AttrValue = std::variant<int64_t, double, std::string>;

struct Attr {
  std::string name;
  AttrValue value;
};

/**
 * Attribute look-ups shared by Tile IR and GPU IR ops. A missing or mistyped attribute is a
 * metile bug: METILE_ERROR_INTERNAL naming the attribute and `op` (the op's name).
 */
const AttrValue* find_attr(const std::vector<Attr>& attrs, std::string_view name);
int64_t attr_int(const std::vector<Attr>& attrs, std::string_view name, std::string_view op);
/** An integer or float attribute as a double. */
double attr_num(const std::vector<Attr>& attrs, std::string_view name, std::string_view op);
const std::string& attr_str(const std::vector<Attr>& attrs, std::string_view name,
                            std::string_view op);
/** Gives `name` the value `v`, in its place where the op has it, else last. */
void set_attr(std::vector<Attr>& attrs, std::string_view name, AttrValue v);

/** A source location: file index into Program::files (1-based; 0 = unknown) and line. */
struct Loc {
  uint32_t file = 0;
  int32_t line = 0;
  bool operator==(const Loc& o) const { return file == o.file && line == o.line; }
};

struct Op;

struct Block {
  std::vector<ValueId> args;
  std::vector<Op> ops;
};

struct Op {
  OpKind kind{};
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  std::vector<Attr> attrs;
  std::vector<Block> regions;  // empty, or exactly one block for region ops
  Loc loc;

  ValueId result() const { return results.empty() ? kNoValue : results[0]; }
  const AttrValue* find_attr(std::string_view name) const;
  int64_t attr_int(std::string_view name) const;
  double attr_num(std::string_view name) const;  // integer or float attribute as double
  const std::string& attr_str(std::string_view name) const;
  void set_attr(std::string_view name, AttrValue v);
  Block& body() { return regions.at(0); }
  const Block& body() const { return regions.at(0); }
};

struct Param {
  std::string name;
  ValueId value = kNoValue;
};

/** Deepest nesting of regions (loops, roles) a program may have; parsing, verifying and
 * printing recurse once per level. */
inline constexpr int kMaxRegionDepth = 64;

struct Program {
  std::string name;
  std::vector<Param> params;
  Block body;
  std::vector<Type> values{Type{}};  // index = ValueId; slot 0 is the "none" value
  std::vector<std::string> files;    // Loc::file - 1 indexes this
  std::vector<std::pair<std::string, std::string>> constexprs;
  int64_t num_threads = 0;  // SIMT thread count T; 0 when the program uses no SIMT op

  ValueId new_value(const Type& t) {
    values.push_back(t);
    return static_cast<ValueId>(values.size() - 1);
  }
  const Type& type(ValueId v) const { return values.at(v); }
  bool valid(ValueId v) const { return v != kNoValue && v < values.size(); }
  uint32_t intern_file(const std::string& file);
  /** "file:line: " for a known location, else "". */
  std::string where(const Loc& loc) const;
};

/** Bytes of threadgroup memory one SHARED op allocates (saturating at UINT64_MAX). */
uint64_t shared_bytes(const Program& p, const Op& shared_op);
/**
 * Bytes of threadgroup memory a program instance allocates: the sum over its shared() ops (each
 * op owns one allocation per instance, however often it runs), saturating at UINT64_MAX.
 */
uint64_t shared_memory_bytes(const Program& p);

/**
 * The text after "pid (x, y, z) idx (...)" on a device_print line (src/codegen/prelude/
 * device_print.h) for value `k` of `print_op`: " PREFIX" (when not empty) and " (operand k)"
 * when the op prints several values. Every device prints this same string.
 */
std::string device_print_label(const Op& print_op, size_t k);
/** The values a device_print prints (its operands without the activity masks). */
size_t device_print_values(const Op& print_op);

/** True when the program contains an op with the kSimt trait. */
bool uses_simt(const Program& p);

/** Infers result types of `op` from its operand types and attributes (type_rules.cpp). */
struct TypeContext {
  const Program* program = nullptr;
  /** The SIMT thread count; 0 while unknown. Builders resolve it by unification. */
  int64_t* num_threads = nullptr;
  bool allow_unresolved_threads = false;
};
std::vector<Type> infer_result_types(const Op& op, const TypeContext& ctx);

/** Checks the whole program; throws Error(METILE_ERROR_INVALID_PROGRAM) naming op and location. */
void verify(const Program& program);

/** Canonical text form. `with_locations` adds `loc("file":line)` suffixes (cache keys use them). */
std::string print(const Program& program, bool with_locations = true);
/** A `// comment` for an op's line (empty: none); a region op's note follows its `{`. */
using OpNote = std::function<std::string(const Op&)>;
/** print() with each op's note; the text still parses (comments are ignored). */
std::string print(const Program& program, bool with_locations, const OpNote& note);
/** Parses print()'s output and verifies it; throws Error(METILE_ERROR_INVALID_PROGRAM). */
Program parse(std::string_view text);

}  // namespace metile
