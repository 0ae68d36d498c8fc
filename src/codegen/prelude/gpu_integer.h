// Integer division and shifts with the meaning of docs/semantics.md on any input, shared by the MSL
// and CUDA preludes (pasted after them by src/codegen/msl.cpp and cuda.cpp). Written in the C++
// subset both languages accept; the including prelude defines MT_FN (its function qualifiers)
// and mt_u64 (a 64-bit unsigned integer type) first.

// Truncating division and remainder: x / 0 gives 0 and MIN / -1 wraps instead of trapping.
template <typename T>
MT_FN T mt_div(T a, T b) {
  if (b == T(0)) return T(0);
  if (T(-1) < T(0) && b == T(-1)) return T(mt_u64(0) - mt_u64(a));  // no signed overflow
  return T(a / b);
}
template <typename T>
MT_FN T mt_mod(T a, T b) {
  if (b == T(0) || (T(-1) < T(0) && b == T(-1))) return T(0);
  return T(a % b);
}
template <typename T>
MT_FN T mt_floordiv(T a, T b) {
  T q = mt_div(a, b);
  bool adjust = T(-1) < T(0) && b != T(0) && mt_mod(a, b) != T(0) && ((a < T(0)) != (b < T(0)));
  return adjust ? T(q - T(1)) : q;
}

// Shift counts are taken modulo the operand's bit width.
template <typename T>
MT_FN T mt_shl(T a, T b) { return T(a << (b & T(sizeof(T) * 8 - 1))); }
template <typename T>
MT_FN T mt_shr(T a, T b) { return T(a >> (b & T(sizeof(T) * 8 - 1))); }
