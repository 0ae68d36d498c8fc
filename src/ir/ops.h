/** \file ops.h
 * Op kinds, traits and attribute specs, all expanded from ops.def.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace metile {

enum class OpKind : uint16_t {
#define OP(E, name, pin, ...) E = pin,
#include "ir/ops.def"
};

enum Trait : uint32_t {
  kPure = 1u << 0,         // no side effects: removable when unused, CSE-able
  kElementwise = 1u << 1,  // acts per element (also implied by kBinary/kCompare/kUnary)
  kBinary = 1u << 2,      // two operands of one dtype (binary rule in type_rules.cpp)
  kCompare = 1u << 3,     // a comparison: two operands of one dtype, a bool result
  kUnary = 1u << 4,       // one operand, a result of its type
  kFloatOnly = 1u << 5,  // operand must be a float type
  kMemory = 1u << 6,     // reads or writes memory
  kSideEffect = 1u << 7,  // writes or allocates memory, synchronizes, prints: never removed or merged
  kReduce = 1u << 8,      // a reduction (sum, max, min) to a scalar or along an axis
  kRegion = 1u << 9,  // owns blocks: one, or two for if and while (num_regions)
  kTerminator = 1u << 10,  // ends its block (yield)
  kSimt = 1u << 11,  // needs the SIMT thread count T
  kAtomic = 1u << 12,  // an atomic read-modify-write through a pointer (tile); gives the old values
  kScan = 1u << 13,    // an inclusive scan along an axis (CUMSUM, CUMPROD): same type as its operand
};

enum class AttrKind : uint8_t { integer, number, string };

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool optional = false;  // "name?:kind" in ops.def: an op may go without it
};

struct OpInfo {
  OpKind kind;
  std::string_view name;
  int min_operands;
  int max_operands;  // -1: unbounded
  int num_results;   // -1: variable
  std::vector<AttrSpec> attrs;
  uint32_t traits;
};

const OpInfo& op_info(OpKind kind);
inline std::string_view op_name(OpKind kind) { return op_info(kind).name; }
inline bool has_trait(OpKind kind, uint32_t t) { return (op_info(kind).traits & t) != 0; }
inline bool is_elementwise(OpKind kind) {
  return has_trait(kind, kElementwise | kBinary | kCompare | kUnary);
}
/** Blocks a region op owns: two for IF (then, else) and WHILE (before, after), else one; 0 for
 * ops without the kRegion trait. */
inline size_t num_regions(OpKind kind) {
  if (!has_trait(kind, kRegion)) return 0;
  return kind == OpKind::IF || kind == OpKind::WHILE ? 2 : 1;
}
std::optional<OpKind> parse_op_name(std::string_view name);
/** True when `pin` is the value of some op (used to validate C API input). */
bool is_valid_op(int pin);
/** Every op, in table order. */
const std::vector<OpKind>& all_ops();

}  // namespace metile
