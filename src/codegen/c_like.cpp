// Spelling of element-wise ops for C-family dialects. Semantics follow docs/semantics.md exactly:
// integer arithmetic wraps (spelled through unsigned helpers, since signed overflow is undefined
// in C), narrow floats are computed in f32 and rounded after every op, and the cases C leaves
// undefined (division by zero, oversized shifts, out-of-range float->int) go through helpers
// with defined results so that no input can trap.
#include "codegen/c_like.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <unordered_set>

#include "support/error.h"
#include "support/float8.h"
#include "support/half.h"
#include "support/text.h"

namespace metile {

namespace {

size_t slot(DType d) { return static_cast<size_t>(d); }

std::string paren(const std::string& s) { return "(" + s + ")"; }

bool is_unsigned_int(DType d) { return d == DType::u32 || d == DType::u8; }

// Narrow ints are promoted to int by C before arithmetic; wrapping needs no helper there, only
// the conversion back to the narrow type.
bool needs_wrap_helper(DType d) { return d == DType::i32 || d == DType::i64; }

std::string cast_to(const Dialect& d, DType to, const std::string& x) {
  return fill_pattern(d.cast, x, d.value(to));
}


// A compute-type expression back in the value type (a no-op unless the two differ).
std::string to_value(const Dialect& d, DType dtype, const std::string& x) {
  const std::string& c = d.compute_type[slot(dtype)];
  return c.empty() || c == d.value(dtype) ? x : cast_to(d, dtype, x);
}

// Rounds a compute-type result to `dtype`'s value type.
std::string rounded(const Dialect& d, DType dtype, const std::string& x) {
  const std::string& r = d.round_to[slot(dtype)];
  return r.empty() ? to_value(d, dtype, x) : fill_pattern(r, x);
}

// Operand in the type float math runs in.
std::string computed(const Dialect& d, DType dtype, const std::string& x) {
  const std::string& c = d.compute_type[slot(dtype)];
  if (c.empty() || c == d.value(dtype)) return x;
  return fill_pattern(d.cast, x, c);
}

std::string float_binary(const Dialect& d, OpKind kind, DType t, const std::string& a0,
                         const std::string& b0) {
  std::string a = computed(d, t, a0), b = computed(d, t, b0);
  std::string r;
  switch (kind) {
    case OpKind::ADD: r = a + " + " + b; break;
    case OpKind::SUB: r = a + " - " + b; break;
    case OpKind::MUL: r = a + " * " + b; break;
    case OpKind::DIV: r = a + " / " + b; break;
    case OpKind::FLOORDIV: r = "mt_floordiv(" + a + ", " + b + ")"; break;
    case OpKind::MOD: r = d.math_fn[static_cast<size_t>(kind)] + "(" + a + ", " + b + ")"; break;
    case OpKind::POW: r = d.math_fn[static_cast<size_t>(kind)] + "(" + a + ", " + b + ")"; break;
    // maxNum/minNum return one operand unchanged: no rounding needed.
    case OpKind::MAXIMUM: return "mt_fmax(" + a0 + ", " + b0 + ")";
    case OpKind::MINIMUM: return "mt_fmin(" + a0 + ", " + b0 + ")";
    default:
      fail(METILE_ERROR_INTERNAL, "codegen", op_name(kind), " has no float spelling");
  }
  return rounded(d, t, paren(r));
}

std::string int_binary(const Dialect& d, OpKind kind, DType t, const std::string& a,
                       const std::string& b) {
  auto helper = [&](const char* fn) { return std::string(fn) + "(" + a + ", " + b + ")"; };
  auto narrow = [&](const std::string& op) { return cast_to(d, t, a + " " + op + " " + b); };
  switch (kind) {
    case OpKind::ADD: return needs_wrap_helper(t) ? helper("mt_wrap_add") : narrow("+");
    case OpKind::SUB: return needs_wrap_helper(t) ? helper("mt_wrap_sub") : narrow("-");
    case OpKind::MUL: return needs_wrap_helper(t) ? helper("mt_wrap_mul") : narrow("*");
    case OpKind::DIV: return helper("mt_div");
    case OpKind::MOD: return helper("mt_mod");
    case OpKind::FLOORDIV: return helper("mt_floordiv");
    case OpKind::MAXIMUM: return paren(a + " > " + b + " ? " + a + " : " + b);
    case OpKind::MINIMUM: return paren(a + " < " + b + " ? " + a + " : " + b);
    case OpKind::BITAND: return t == DType::boolean ? paren(a + " & " + b) : narrow("&");
    case OpKind::BITOR: return t == DType::boolean ? paren(a + " | " + b) : narrow("|");
    case OpKind::BITXOR: return t == DType::boolean ? paren(a + " != " + b) : narrow("^");
    case OpKind::SHL: return helper("mt_shl");
    case OpKind::SHR: return helper("mt_shr");
    default:
      fail(METILE_ERROR_INTERNAL, "codegen", op_name(kind), " has no integer spelling");
  }
}

std::string compare(OpKind kind, const std::string& a, const std::string& b) {
  const char* op = nullptr;
  switch (kind) {
    case OpKind::LT: op = " < "; break;
    case OpKind::LE: op = " <= "; break;
    case OpKind::GT: op = " > "; break;
    case OpKind::GE: op = " >= "; break;
    case OpKind::EQ: op = " == "; break;
    case OpKind::NE: op = " != "; break;
    default: fail(METILE_ERROR_INTERNAL, "codegen", op_name(kind), " is not a comparison");
  }
  return paren(a + op + b);
}

struct MathRow {
  OpKind kind;
  const char* name[3];  // by MathColumn
};
constexpr MathRow kMath[] = {
#define MATH(kind, host_cpp, msl, cuda) {OpKind::kind, {host_cpp, msl, cuda}},
#include "codegen/math.def"
#undef MATH
};

}  // namespace

void set_math_functions(Dialect& d, MathColumn column) {
  for (const MathRow& m : kMath)
    d.math_fn[static_cast<size_t>(m.kind)] = m.name[static_cast<size_t>(column)];
}

std::vector<std::string> math_function_names(MathColumn column) {
  std::vector<std::string> names;
  for (const MathRow& m : kMath) names.push_back(m.name[static_cast<size_t>(column)]);
  return names;
}

std::string fill_pattern(std::string_view pattern, std::string_view x, std::string_view t) {
  std::string out;
  out.reserve(pattern.size() + x.size());
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "{}") == 0) {
      out += x;
      ++i;
    } else if (pattern.compare(i, 3, "{t}") == 0) {
      out += t;
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

std::string spell_int_literal(const Dialect& d, DType dtype, int64_t v) {
  if (is_float(dtype)) return spell_float_literal(d, dtype, static_cast<double>(v));
  if (dtype == DType::boolean) return v ? "true" : "false";
  const std::string& pattern = d.int_literal[slot(dtype)];
  if (pattern.empty()) fail(METILE_ERROR_INTERNAL, "codegen", "no literal for ", dtype_name(dtype));
  // The value wraps into the dtype first (a const of the dtype always holds an in-range value).
  int64_t x = v;
  switch (dtype) {
    case DType::i32: x = static_cast<int32_t>(v); break;
    case DType::u32: x = static_cast<uint32_t>(v); break;
    case DType::i8: x = static_cast<int8_t>(v); break;
    case DType::u8: x = static_cast<uint8_t>(v); break;
    default: break;
  }
  // The most negative value has no literal form (the minus is an operator): write -(MAX) - 1.
  if ((dtype == DType::i32 && x == INT32_MIN) || (dtype == DType::i64 && x == INT64_MIN))
    return "(" + fill_pattern(pattern, "-" + std::to_string(-(x + 1))) + " - " + fill_pattern(pattern, "1") + ")";
  std::string lit = fill_pattern(pattern, std::to_string(x));
  return x < 0 ? paren(lit) : lit;
}

std::string spell_float_literal(const Dialect& d, DType dtype, double v) {
  if (!is_float(dtype)) {
    // Integer constants come from integer attributes; a float here is a builder invariant.
    METILE_ASSERT(std::nearbyint(v) == v, "non-integral literal for ", dtype_name(dtype));
    return spell_int_literal(d, dtype, static_cast<int64_t>(v));
  }
  float f = static_cast<float>(v);
  if (dtype == DType::f16) f = f16_to_float(float_to_f16(f));
  if (dtype == DType::bf16) f = bf16_to_float(float_to_bf16(f));
  if (dtype == DType::f8e4m3) f = mt_round_f8e4m3(f);
  if (dtype == DType::f8e5m2) f = mt_round_f8e5m2(f);
  std::string s;
  if (std::isnan(f)) {
    s = d.nan_f32;
  } else if (std::isinf(f)) {
    s = f > 0 ? d.inf_f32 : "(-" + d.inf_f32 + ")";
  } else {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);  // shortest round-trip form
    s.assign(buf, end);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    s += "f";
    if (f < 0 || (f == 0 && std::signbit(f))) s = paren(s);
  }
  // The literal is f32; narrow value types get an explicit (exact) conversion.
  return d.value(dtype) == d.value(DType::f32) ? s : cast_to(d, dtype, s);
}

std::string spell_zero(const Dialect& d, DType dtype) {
  return is_float(dtype) ? spell_float_literal(d, dtype, 0.0) : spell_int_literal(d, dtype, 0);
}

std::string spell_binary(const Dialect& d, OpKind kind, DType dtype, const std::string& a,
                         const std::string& b) {
  if (has_trait(kind, kCompare)) return compare(kind, a, b);
  if (is_float(dtype)) return float_binary(d, kind, dtype, a, b);
  return int_binary(d, kind, dtype, a, b);
}

std::string spell_unary(const Dialect& d, OpKind kind, DType t, const std::string& x) {
  if (kind == OpKind::NOT) return t == DType::boolean ? "(!" + x + ")" : cast_to(d, t, "~" + x);
  if (!is_float(t)) {
    switch (kind) {
      case OpKind::NEG:
        return needs_wrap_helper(t) ? "mt_wrap_neg(" + x + ")" : cast_to(d, t, "-" + x);
      case OpKind::ABS:
        if (is_unsigned_int(t)) return x;
        return needs_wrap_helper(t) ? "mt_wrap_abs(" + x + ")"
                                    : cast_to(d, t, paren(x + " < 0 ? -" + x + " : " + x));
      default:
        fail(METILE_ERROR_INTERNAL, "codegen", op_name(kind), " needs a float operand");
    }
  }
  // Negation, abs, floor and ceil of a representable value stay representable: no rounding.
  switch (kind) {
    case OpKind::NEG: return "(-" + x + ")";
    case OpKind::ABS:
    case OpKind::FLOOR:
    case OpKind::CEIL:
      return to_value(d, t, d.math_fn[static_cast<size_t>(kind)] + "(" + computed(d, t, x) + ")");
    case OpKind::RSQRT: return rounded(d, t, "mt_rsqrt(" + computed(d, t, x) + ")");
    case OpKind::SIGMOID: return rounded(d, t, "mt_sigmoid(" + computed(d, t, x) + ")");
    default: break;
  }
  const std::string& fn = d.math_fn[static_cast<size_t>(kind)];
  if (fn.empty()) fail(METILE_ERROR_INTERNAL, "codegen", op_name(kind), " has no math function");
  return rounded(d, t, fn + "(" + computed(d, t, x) + ")");
}

std::string spell_select(const std::string& c, const std::string& a, const std::string& b) {
  return paren(c + " ? " + a + " : " + b);
}

std::string spell_cast(const Dialect& d, DType from, DType to, const std::string& x) {
  if (from == to) return x;
  if (to == DType::boolean) return paren(x + " != " + spell_zero(d, from));
  if (is_float(to)) {
    // Everything converts through the target's compute type, then rounds to the narrow type.
    const std::string& c = d.compute_type[slot(to)];
    std::string y = d.value(from) == c ? x : fill_pattern(d.cast, x, c);
    return rounded(d, to, y);
  }
  if (is_float(from)) return "mt_f2i<" + d.value(to) + ">(" + computed(d, from, x) + ")";
  return cast_to(d, to, x);  // integer and bool conversions are modular in C
}

std::string spell_bitcast(const Dialect& d, DType from, DType to, const std::string& x) {
  if (from == to) return x;
  // Through memory's representation: a narrow float's value is its exact f32 value, so storing
  // it gives back its bits, and loading the reinterpreted bits gives the other dtype's value.
  const std::string bits = fill_pattern(d.bitcast, spell_to_storage(d, from, x), d.storage(to));
  return spell_from_storage(d, to, bits);
}

std::string spell_from_storage(const Dialect& d, DType dtype, const std::string& x) {
  const std::string& p = d.load_from_storage[slot(dtype)];
  return p.empty() ? x : fill_pattern(p, x);
}

std::string spell_to_storage(const Dialect& d, DType dtype, const std::string& x) {
  const std::string& p = d.store_to_storage[slot(dtype)];
  return p.empty() ? x : fill_pattern(p, x);
}

namespace {

// Words a generated C++/MSL/CUDA translation unit cannot use as a variable or function name:
// C++20 keywords and alternative tokens, the address-space and function qualifiers of MSL and
// CUDA, and the few lowercase macros the preludes' headers define (stdio's streams, offsetof).
const std::unordered_set<std::string>& reserved_words() {
  static const std::unordered_set<std::string> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "atomic_cancel", "atomic_commit",
      "atomic_noexcept", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval",
      "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield",
      "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit",
      "export", "extern", "false", "float", "for", "friend", "goto", "if", "import", "inline", "int",
      "long", "module", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr",
      "operator", "or", "or_eq", "private", "protected", "public", "reflexpr", "register",
      "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "synchronized", "template", "this",
      "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned",
      "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "final",
      "override",
      // MSL and CUDA qualifiers, scalar types and the kernel entry
      "half", "bfloat", "kernel", "vertex", "fragment", "device", "threadgroup",
      "threadgroup_imageblock", "constant", "thread", "ray_data", "object_data", "main",
      "uint", "uchar", "ushort", "ulong", "size_t", "ptrdiff_t",
      "max_align_t", "nullptr_t", "dim3",
      // lowercase macros of <stdio.h>, <stddef.h> and the metal shim
      "stdin", "stdout", "stderr", "offsetof", "errno", "assert", "L_ctermid", "L_cuserid",
      "L_tmpnam", "P_tmpdir"};
  return words;
}

// Type names that come in families: int8_t..uint64_t and their fast/least forms, and the vector
// and matrix types of MSL and CUDA (float4, packed_half2, uint3, longlong2, float4x4, ...).
bool is_type_family(const std::string& s) {
  static const std::regex families(
      "u?int(8|16|32|64|max|ptr|_fast(8|16|32|64)|_least(8|16|32|64))_t"
      "|(packed_)?(bool|char|uchar|short|ushort|int|uint|long|ulong|longlong|ulonglong|half|"
      "bfloat|float|double)[1-4](x[1-4])?"
      "|(simdgroup_)?(half|float|bfloat)[1-8]x[1-8]|memory_order(_[a-z_]+)?"
      "|atomic(_(bool|char|uchar|short|ushort|int|uint|long|ulong|llong|ullong|float|double|flag|"
      "size_t|ptrdiff_t|u?intptr_t|u?int(8|16|32|64)_t))?");
  return std::regex_match(s, families);
}

// Macro spellings: capitals, no lowercase letter, and an underscore (INT64_C, FLT_MAX, MT_INLINE, M_PI_F),
// or one of the underscore-free macros of the preludes' headers.
bool is_macro_like(const std::string& s) {
  static const std::unordered_set<std::string> bare = {"NULL", "EOF", "BUFSIZ", "NAN", "INFINITY",
                                                       "MAXFLOAT", "HUGE_VAL", "CHAR_BIT"};
  if (bare.count(s)) return true;
  bool lower = std::any_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  bool upper = std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  return upper && !lower && s.find('_') != std::string::npos;
}

}  // namespace

std::string c_identifier(std::string_view name) {
  std::string s;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    s += ok ? c : '_';
  }
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s = "_" + s;
  // Leading "__" and "_X" are the implementation's; mt_/MT_/metile_/METILE_ are the preludes'.
  bool prefix_taken = (s.size() >= 2 && s[0] == '_' && (s[1] == '_' || (s[1] >= 'A' && s[1] <= 'Z'))) ||
                      s.starts_with("mt_") || s.starts_with("MT_") || s.starts_with("metile_") ||
                      s.starts_with("METILE_");
  if (prefix_taken) s = "u" + s;
  // A trailing '_' is never a keyword, a type or a macro of any of the three languages.
  if (reserved_words().count(s) || is_type_family(s) || is_macro_like(s)) s += "_";
  return s;
}

SourceWriter& SourceWriter::line(std::string_view text) {
  if (!text.empty()) out_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << text;
  out_ << '\n';
  return *this;
}

SourceWriter& SourceWriter::open(std::string_view head) {
  line(head.empty() ? std::string("{") : std::string(head) + " {");
  ++indent_;
  return *this;
}

SourceWriter& SourceWriter::close(std::string_view tail) {
  METILE_ASSERT(indent_ > 0, "unbalanced SourceWriter::close");
  --indent_;
  return line("}" + std::string(tail));
}

SourceWriter& SourceWriter::comment(std::string_view text) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    // Comments carry user strings (source locations, names): printable_ascii keeps every one of
    // them inside its comment (no \r, no line splice, no "*/").
    line("// " + printable_ascii(text.substr(start, end - start)));
    start = end + 1;
  }
  return *this;
}

SourceWriter& SourceWriter::raw(std::string_view text) {
  out_ << text;
  return *this;
}

std::string byte_initializer(std::string_view text) {
  std::string s = "{";
  // Bytes above 127 are cast: a plain value would narrow where char is signed (an error in
  // MSL and C++ brace initialization), and a negative one where it is unsigned.
  for (unsigned char ch : text)
    s += (ch > 127 ? "(char)" : "") + std::to_string(static_cast<unsigned>(ch)) + ", ";
  return s + "0}";
}

}  // namespace metile
