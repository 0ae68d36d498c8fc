/** \file c_like.h
 * The core shared by every C-family code generator (CPU C++, MSL, CUDA C++): a Dialect table
 * with the spellings that differ between them, the spelling of every element-wise Tile IR op as
 * an expression over operand expressions (with the exact semantics of docs/semantics.md), literals,
 * and a small indented source writer.
 *
 * Values are spelled in a dtype's *value type* (Dialect::value_type); memory holds the *storage
 * type*. A dialect without native f16/bf16 arithmetic keeps those values in `float`, always
 * holding a number exactly representable in the narrow type: every float op computes in f32 and
 * rounds through Dialect::round_to. Expressions may call these helpers, which each dialect's
 * prelude must define (all take and return value types):
 *
 *   mt_div(a, b), mt_mod(a, b)        integer division/remainder truncating toward zero;
 *                                     b == 0 gives 0, MIN / -1 wraps (no trap)
 *   mt_floordiv(a, b)                 floor(a / b) on integers and floats
 *   mt_fmax(a, b), mt_fmin(a, b)      IEEE maxNum/minNum: a NaN operand yields the other one
 *   mt_shl(a, b), mt_shr(a, b)        shifts; the count is taken modulo the bit width
 *   mt_wrap_add/sub/mul(a, b), mt_wrap_neg(a), mt_wrap_abs(a)   two's complement wrap-around
 *   mt_sigmoid(x), mt_rsqrt(x)        1 / (1 + exp(-x)), 1 / sqrt(x) in f32
 *   mt_f2i<T>(x)                      float -> integer, truncating (NaN -> 0, saturating)
 */
#pragma once

#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ops.h"
#include "ir/types.h"

namespace metile {

/** Number of slots in per-dtype tables (indexed by the DType value). */
inline constexpr size_t kDTypeSlots = 16;

struct Dialect {
  std::string name;
  /** Type a value of each dtype has in expressions, e.g. "float" for f16 on the CPU. */
  std::array<std::string, kDTypeSlots> value_type;
  /** Type of each dtype in memory, e.g. "uint16_t" for f16 on the CPU, "half" in MSL. */
  std::array<std::string, kDTypeSlots> storage_type;
  /** "{}" templates converting storage to value and back; empty when the types are equal. */
  std::array<std::string, kDTypeSlots> load_from_storage;
  std::array<std::string, kDTypeSlots> store_to_storage;
  /** "{}" templates rounding an f32 result to the dtype; empty when arithmetic is native. */
  std::array<std::string, kDTypeSlots> round_to;
  /** The type float math of each dtype is computed in ("float" for f16 unless native). */
  std::array<std::string, kDTypeSlots> compute_type;
  /** f32 math function per op ("expf", "exp", ...), by op pin: math.def's column. */
  std::array<std::string, 128> math_fn;
  /** "{}" templates turning decimal digits into an integer literal of each dtype. */
  std::array<std::string, kDTypeSlots> int_literal;
  /** Spellings of f32 infinity and NaN (no portable literal exists). */
  std::string inf_f32, nan_f32;
  /** "{type}({x})" style cast template with {t} and {} placeholders. */
  std::string cast = "(({t})({}))";
  /** Reinterprets the bits of {} (a storage-type value) as the storage type {t} of the same
   * width: the preludes' mt_bitcast (a memcpy) in C++ and CUDA, as_type in MSL. */
  std::string bitcast = "mt_bitcast<{t}>({})";
  /** Qualifiers. */
  std::string kernel_qualifier;   // before the entry point: `extern "C"`, `kernel`, `__global__`
  std::string restrict_qualifier; // `__restrict`, `__restrict__`, "" (MSL)
  std::string inline_qualifier;   // `static inline`, `__device__ inline`, `inline`
  std::array<std::string, 2> address_space;  // per AddrSpace: "", "device"; "", "threadgroup"

  const std::string& value(DType d) const { return value_type[static_cast<size_t>(d)]; }
  const std::string& storage(DType d) const { return storage_type[static_cast<size_t>(d)]; }
};

/** The dialects with a column in math.def. */
enum class MathColumn { host_cpp, msl, cuda };
/** Fills d.math_fn from `column` of math.def. */
void set_math_functions(Dialect& d, MathColumn column);
/** Every function name in `column` of math.def (generated code calls them: reserve them). */
std::vector<std::string> math_function_names(MathColumn column);

/** Replaces "{}" in `pattern` with `x` (and "{t}" with `t`). */
std::string fill_pattern(std::string_view pattern, std::string_view x, std::string_view t = {});

/** A literal of `dtype` from an integer or float constant, rounded to the dtype. */
std::string spell_int_literal(const Dialect& d, DType dtype, int64_t v);
std::string spell_float_literal(const Dialect& d, DType dtype, double v);
/** The zero of a dtype's value type. */
std::string spell_zero(const Dialect& d, DType dtype);

/**
 * Element-wise ops. `dtype` is the operand dtype (compare results are bool; cast gives `to`).
 * Operands are value-type expressions; results are value-type expressions, already rounded.
 */
std::string spell_binary(const Dialect& d, OpKind kind, DType dtype, const std::string& a,
                         const std::string& b);
std::string spell_unary(const Dialect& d, OpKind kind, DType dtype, const std::string& x);
std::string spell_select(const std::string& c, const std::string& a, const std::string& b);
std::string spell_cast(const Dialect& d, DType from, DType to, const std::string& x);
/** x's bits (in memory: its storage type) read as `to`, a dtype of the same width. */
std::string spell_bitcast(const Dialect& d, DType from, DType to, const std::string& x);
/** Conversion between a dtype's storage and value types. */
std::string spell_from_storage(const Dialect& d, DType dtype, const std::string& x);
std::string spell_to_storage(const Dialect& d, DType dtype, const std::string& x);

/** A user's name as an identifier of generated C++/MSL/CUDA: other characters become '_'; a name
 *  in the implementation's or the preludes' prefixes (`__`, `_X`, `mt_`, `metile_`, `MT_`,
 *  `METILE_`) gets a leading 'u'; a keyword, a type name (`int64_t`, `float4`, `atomic_uint`) or a
 *  macro spelling (`NULL`, `INT64_C`, `stdout`) gets a trailing '_'. Distinct names may meet
 *  (`float4` and `float4_`): callers make the results unique. */
std::string c_identifier(std::string_view name);

/** Indented source text. */
class SourceWriter {
 public:
  /** Writes one line at the current indentation. */
  SourceWriter& line(std::string_view text = {});
  /** Writes `head {` and indents. */
  SourceWriter& open(std::string_view head);
  /** Dedents and writes `}` plus `tail`. */
  SourceWriter& close(std::string_view tail = {});
  /** A `// text` comment, one per line of `text`, each escaped by printable_ascii (user strings
   * such as source locations pass through here and must stay comments). */
  SourceWriter& comment(std::string_view text);
  /** Raw text, written as is (e.g. a prelude). */
  SourceWriter& raw(std::string_view text);
  int indent() const { return indent_; }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  int indent_ = 0;
};

/**
 * "{104, 105, (char)195, 0}": the bytes of `text` and a terminating 0 as an array initializer, so
 * user text (device_print's prefix) enters generated source as numbers, never as a literal.
 */
std::string byte_initializer(std::string_view text);

}  // namespace metile
