// The C++ dialect of the cpu backend: f16/bf16/FP8 are `float` values holding exactly
// representable numbers and 16- or 8-bit patterns in memory, bool is a byte in memory, exp/exp2
// are the prelude's vectorizable versions and the other math functions are libm's (as the interp
// device uses).
#include "codegen/cpu_cpp.h"

namespace metile {

const Dialect& cpu_dialect() {
  static const Dialect d = [] {
    Dialect x;
    x.name = "cpu";
    auto set = [&](DType t, const char* value, const char* storage, const char* literal) {
      size_t i = static_cast<size_t>(t);
      x.value_type[i] = value;
      x.storage_type[i] = storage;
      x.int_literal[i] = literal;
      x.compute_type[i] = is_float(t) ? "float" : "";
    };
    set(DType::f32, "float", "float", "");
    set(DType::f16, "float", "uint16_t", "");
    set(DType::bf16, "float", "uint16_t", "");
    set(DType::i32, "int32_t", "int32_t", "{}");
    set(DType::u32, "uint32_t", "uint32_t", "{}u");
    set(DType::i64, "int64_t", "int64_t", "INT64_C({})");
    set(DType::boolean, "bool", "uint8_t", "");
    set(DType::i8, "int8_t", "int8_t", "((int8_t){})");
    set(DType::u8, "uint8_t", "uint8_t", "((uint8_t){})");
    set(DType::f8e4m3, "float", "uint8_t", "");
    set(DType::f8e5m2, "float", "uint8_t", "");
    auto narrow = [&](DType t, const char* load, const char* store, const char* round) {
      size_t i = static_cast<size_t>(t);
      x.load_from_storage[i] = load;
      x.store_to_storage[i] = store;
      x.round_to[i] = round;
    };
    narrow(DType::f16, "mt_f16_to_f32({})", "mt_f32_to_f16({})", "mt_round_f16({})");
    // A bool in memory is a byte; any non-zero byte reads as true.
    narrow(DType::boolean, "({} != 0)", "(uint8_t)({})", "");
    narrow(DType::bf16, "mt_bf16_to_f32({})", "mt_f32_to_bf16({})", "mt_round_bf16({})");
    narrow(DType::f8e4m3, "mt_f8e4m3_to_f32({})", "mt_f32_to_f8e4m3({})", "mt_round_f8e4m3({})");
    narrow(DType::f8e5m2, "mt_f8e5m2_to_f32({})", "mt_f32_to_f8e5m2({})", "mt_round_f8e5m2({})");
    set_math_functions(x, MathColumn::host_cpp);
    x.inf_f32 = "__builtin_inff()";
    x.nan_f32 = "__builtin_nanf(\"\")";
    x.cast = "(({t})({}))";
    x.kernel_qualifier = "extern \"C\"";
    x.restrict_qualifier = "__restrict";
    x.inline_qualifier = "static inline";
    x.address_space = {"", ""};
    return x;
  }();
  return d;
}

}  // namespace metile
