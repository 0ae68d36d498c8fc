// The differential fuzzer's program generator (see diff_gen.h for the rules that keep every
// generated program's answer device-independent).
#include "diff_gen.h"

#include <random>

#include "frontend/builder.h"
#include "ir/reduction.h"

namespace metile::fuzz {

namespace {

struct Val {
  ValueId id = kNoValue;
  bool fuzzy = false;
};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed), b_("fuzz" + std::to_string(seed % 1000000)) {}

  GenProgram run() {
    static const int64_t sizes[] = {1, 8, 64, 256};
    size_ = sizes[pick(4)];
    int outputs = 2 + pick(3);
    ValueId x = b_.param("X", Type::ptr(DType::f32));
    ValueId in = b_.param("I", Type::ptr(DType::i32));
    ValueId z = b_.param("Z", Type::ptr(DType::f32));
    ValueId m = b_.param("M", Type::ptr(DType::boolean));
    std::vector<ValueId> ys;
    for (int i = 0; i < outputs; ++i) ys.push_back(b_.param("Y" + std::to_string(i), Type::ptr(DType::f32)));
    ValueId n = b_.param("n", Type::scalar(DType::i32));
    ValueId s = b_.param("s", Type::scalar(DType::f32));
    offs_ = b_.arange(kNoValue, size_);
    pool_.push_back({b_.load(b_.ptr_offset(x, offs_), kNoValue, kNoValue), false});
    pool_.push_back({b_.load(b_.ptr_offset(in, offs_), kNoValue, kNoValue), false});
    pool_.push_back({n, false});
    pool_.push_back({s, false});
    pool_.push_back({b_.grid(OpKind::PROGRAM_ID, 0), false});
    // The special inputs (NaNs with payloads, signalling NaNs, subnormals, bool bytes other
    // than 0 and 1), and X under a mask read from those bool bytes.
    ValueId bools = b_.load(b_.ptr_offset(m, offs_), kNoValue, kNoValue);
    pool_.push_back({b_.load(b_.ptr_offset(z, offs_), kNoValue, kNoValue), false});
    pool_.push_back({bools, false});
    pool_.push_back({b_.load(b_.ptr_offset(x, offs_), bools, konst(DType::f32, -0.5).id), false});
    int ops = 4 + pick(28);
    for (int i = 0; i < ops; ++i) step(0);
    GenProgram g;
    g.size = size_;
    g.outputs = outputs;
    for (int i = 0; i < outputs; ++i) {
      // The newest values first: they depend on the most ops.
      const Val& v = pool_[pool_.size() - 1 - static_cast<size_t>(pick(std::min<int>(4, static_cast<int>(pool_.size()))))];
      ValueId f = b_.broadcast(b_.cast(v.id, DType::f32), Shape::of(size_));
      b_.store(b_.ptr_offset(ys[i], offs_), f, kNoValue);
      g.fuzzy.push_back(v.fuzzy || type(v.id).dtype == DType::i64 || type(v.id).dtype == DType::u32);
    }
    g.program = b_.finish();
    return g;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool coin(int percent) { return pick(100) < percent; }
  const Type& type(ValueId v) const { return b_.type(v); }
  bool is_float_v(const Val& v) const { return is_float(type(v.id).dtype); }
  bool is_intish(const Val& v) const { return is_int(type(v.id).dtype); }
  DType dt(const Val& v) const { return type(v.id).dtype; }

  Val any() { return pool_[static_cast<size_t>(pick(static_cast<int>(pool_.size())))]; }
  // A value of the kind `want` (0 bool, 1 int, 2 float, -1 numeric): one from the pool, or a cast.
  Val of_kind(int want) {
    for (int tries = 0; tries < 8; ++tries) {
      Val v = any();
      DType d = dt(v);
      int k = d == DType::boolean ? 0 : is_int(d) ? 1 : 2;
      if (k == want || (want == -1 && k != 0)) return v;
    }
    Val v = any();
    if (want == 0) return compare_exact();
    if (want == 2) return {b_.cast(v.id, DType::f32), v.fuzzy};
    if (is_float_v(v) && v.fuzzy) return pool_[1];
    if (is_float_v(v)) return {b_.cast(clamp(v, -100, 100).id, DType::i32), false};
    return {b_.cast(v.id, DType::i32), v.fuzzy};
  }
  Val exact(int want) {
    for (int tries = 0; tries < 8; ++tries) {
      Val v = of_kind(want);
      if (!v.fuzzy) return v;
    }
    return want == 2 ? pool_[0] : want == 1 ? pool_[1] : compare_exact();
  }
  Val konst(DType d, double v) {
    if (is_float(d)) return {b_.const_float(d, v), false};
    return {b_.const_int(d, static_cast<int64_t>(v)), false};
  }
  Val clamp(const Val& v, double lo, double hi) {
    ValueId a = b_.binary(OpKind::MAXIMUM, v.id, konst(dt(v), lo).id);
    return {b_.binary(OpKind::MINIMUM, a, konst(dt(v), hi).id), v.fuzzy};
  }
  Val compare_exact() {
    static const OpKind cmp[] = {OpKind::LT, OpKind::LE, OpKind::GT, OpKind::GE, OpKind::EQ, OpKind::NE};
    Val a = pool_[pick(2)], c = pool_[1];
    return {b_.binary(cmp[pick(6)], a.id, c.id), false};
  }
  // A value safe as a positive integer divisor or shift amount: (v & mask) + add.
  ValueId masked(const Val& v, DType d, int64_t mask, int64_t add) {
    ValueId m = b_.binary(OpKind::BITAND, b_.cast(v.id, d), b_.const_int(d, mask));
    return add ? b_.binary(OpKind::ADD, m, b_.const_int(d, add)) : m;
  }

  void step(int depth) {
    int r = pick(100);
    if (r < 40) return binary();
    if (r < 62) return unary();
    if (r < 74) return cast();
    if (r < 82) return select();
    if (r < 86) return reduce();
    if (r < 89) return scan();
    if (r < 92) return transpose();
    if (r < 97 && depth < 2) return loop(depth);
    return binary();
  }

  // A random op of the table (ops.def) with any of `traits`: new ops are fuzzed as they come.
  OpKind table_op(uint32_t traits) {
    std::vector<OpKind> ops;
    for (OpKind k : all_ops())
      if (has_trait(k, traits)) ops.push_back(k);
    return ops[static_cast<size_t>(pick(static_cast<int>(ops.size())))];
  }

  // A tile from the pool (or one of the loaded inputs when the pick is a scalar).
  Val tile(int want) {
    Val a = of_kind(want);
    return type(a.id).is_tile() ? a : pool_[pick(2)];
  }

  void binary() {
    OpKind k = table_op(kBinary | kCompare);
    if (has_trait(k, kCompare)) {
      Val a = exact(-1), c = exact(coin(50) ? 1 : 2);
      pool_.push_back({b_.binary(k, a.id, c.id), false});
      return;
    }
    switch (k) {
      case OpKind::DIV:
      case OpKind::FLOORDIV:
      case OpKind::MOD: {
        if (k == OpKind::DIV && coin(50)) {  // float division: correctly rounded, but fuzzy
          Val a = of_kind(2), c = of_kind(2);
          ValueId den = b_.binary(OpKind::ADD, b_.unary(OpKind::ABS, c.id), konst(dt(c), 1).id);
          pool_.push_back({b_.binary(k, a.id, den), true});
          return;
        }
        static const DType ints[] = {DType::i32, DType::i64, DType::i8, DType::u32, DType::u8};
        DType d = ints[pick(5)];
        Val a = exact(1), c = exact(1);
        pool_.push_back({b_.binary(k, b_.cast(a.id, d), masked(c, d, 7, 1)), false});
        return;
      }
      case OpKind::BITAND:
      case OpKind::BITOR:
      case OpKind::BITXOR: {
        if (coin(30)) {  // logic on bools (loaded bytes other than 0 and 1 among them)
          Val a = exact(0), c = exact(0);
          pool_.push_back({b_.binary(k, a.id, c.id), false});
          return;
        }
        Val a = exact(1), c = coin(70) ? exact(1) : konst(dt(a), pick(100));
        pool_.push_back({b_.binary(k, a.id, b_.cast(c.id, dt(a))), false});
        return;
      }
      case OpKind::SHL:
      case OpKind::SHR: {
        Val a = exact(1), c = exact(1);
        DType d = dt(a);
        int64_t bits = static_cast<int64_t>(dtype_size(d)) * 8;
        pool_.push_back({b_.binary(k, a.id, masked(c, d, bits - 1, 0)), false});
        return;
      }
      case OpKind::POW: {
        Val a = of_kind(2), c = of_kind(2);
        ValueId base = b_.binary(OpKind::ADD, b_.unary(OpKind::ABS, a.id), konst(dt(a), 1).id);
        ValueId e = clamp(c, -4, 4).id;
        pool_.push_back({b_.binary(k, base, e), true});
        return;
      }
      default: {
        Val a = of_kind(-1);
        Val c = coin(80) ? of_kind(-1) : konst(dt(a), is_signed(dt(a)) || is_float_v(a) ? pick(9) - 4 : pick(5));
        ValueId r = b_.binary(k, a.id, c.id);
        DType d = type(r).dtype;
        bool fz = a.fuzzy || c.fuzzy || (is_float(d) && (k == OpKind::MUL || d != DType::f32));
        pool_.push_back({r, fz});
      }
    }
  }

  void unary() {
    OpKind k = table_op(kUnary);
    if (k == OpKind::NOT) {
      Val a = coin(50) ? exact(0) : exact(1);
      pool_.push_back({b_.unary(k, a.id), false});
      return;
    }
    if (k == OpKind::NEG || k == OpKind::ABS) {
      Val a = of_kind(-1);
      pool_.push_back({b_.unary(k, a.id), a.fuzzy || dt(a) == DType::f16 || dt(a) == DType::bf16});
      return;
    }
    if (k == OpKind::FLOOR || k == OpKind::CEIL) {
      Val a = exact(2);
      pool_.push_back({b_.unary(k, a.id), dt(a) != DType::f32});
      return;
    }
    Val a = of_kind(2);
    ValueId x = a.id;
    if (k == OpKind::LOG || k == OpKind::LOG2 || k == OpKind::SQRT || k == OpKind::RSQRT)
      x = b_.binary(OpKind::ADD, b_.unary(OpKind::ABS, x), konst(dt(a), 1).id);
    if (k == OpKind::EXP || k == OpKind::EXP2) x = clamp({x, a.fuzzy}, -20, 20).id;
    pool_.push_back({b_.unary(k, x), true});
  }

  void cast() {
    static const DType all[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u32,
                                DType::i64, DType::i8,  DType::u8,   DType::boolean};
    DType to = all[pick(9)];
    Val a = any();
    DType from = dt(a);
    if (is_float(from) && !is_float(to)) {
      // Float -> int is discontinuous and out-of-range values differ by device: exact, in range.
      a = exact(2);
      bool uns = to == DType::u32 || to == DType::u8;
      a = clamp(a, uns ? 0 : -100, 100);
    }
    if (to == DType::boolean && a.fuzzy) a = exact(1);
    bool narrow_float = to == DType::f16 || to == DType::bf16;
    pool_.push_back({b_.cast(a.id, to), a.fuzzy || (narrow_float && is_int(dt(a)))});
  }

  void select() {
    Val c = exact(0);
    Val a = of_kind(-1), d = of_kind(-1);
    if (is_float_v(a) != is_float_v(d)) d = {b_.cast(d.id, dt(a)), d.fuzzy};
    ValueId r = b_.select(c.id, a.id, d.id);
    pool_.push_back({r, a.fuzzy || d.fuzzy});
  }

  void reduce() {
    OpKind k = table_op(kReduce);
    Val a = tile(-1);
    bool sum = *reduction_of(k) == Reduction::sum;
    ValueId r = b_.reduce(k, a.id, -1);
    DType d = type(r).dtype;
    pool_.push_back({r, a.fuzzy || (sum && is_float(d)) || d == DType::f16 || d == DType::bf16});
  }

  // An inclusive scan of a tile, forwards or reversed. Float scans may round differently per
  // device (fuzzy); a float product runs over values in [-1, 1] so it never overflows.
  void scan() {
    OpKind k = table_op(kScan);
    Val a = tile(-1);
    const bool product = k == OpKind::CUMPROD;
    if (product && is_float_v(a)) a = clamp(a, -1, 1);
    ValueId r = b_.scan(k, a.id, 0, coin(50));
    pool_.push_back({r, a.fuzzy || is_float_v(a)});
  }

  // A 1-D tile of n = rows * cols elements seen as rows x cols, transposed and flattened again:
  // exact data movement, so its fuzziness is the input's.
  void transpose() {
    Val a = tile(-1);
    const int64_t n = type(a.id).shape.numel();
    int64_t rows = 1;
    for (int64_t d = 2; d * d <= n; ++d)
      if (n % d == 0 && coin(60)) rows = d;
    ValueId m = b_.reshape(a.id, Shape::of(rows, n / rows));
    pool_.push_back({b_.reshape(b_.trans(m), Shape::of(n)), a.fuzzy});
  }

  // for i in [0, trips): c = op(c, v) with v an outer value or the induction variable.
  void loop(int depth) {
    Val init = of_kind(-1);
    ValueId start = b_.const_int(DType::i32, 0), end = b_.const_int(DType::i32, 1 + pick(4)),
            one = b_.const_int(DType::i32, 1);
    auto [iv, carried] = b_.for_begin(start, end, one, {init.id});
    ValueId c = carried[0];
    size_t outer = pool_.size();
    pool_.push_back({iv, false});
    pool_.push_back({c, init.fuzzy || is_float_v(init)});  // later iterations may carry fuzz
    int body = 1 + pick(3);
    for (int i = 0; i < body; ++i) step(depth + 1);
    static const OpKind upd[] = {OpKind::ADD, OpKind::SUB, OpKind::MAXIMUM, OpKind::MINIMUM};
    Val v = pool_.back();
    if (type(v.id).is_tile() && !type(c).is_tile()) v = {iv, false};
    bool fz = init.fuzzy || v.fuzzy || dt(v) != dt(init);
    ValueId next = b_.binary(upd[pick(4)], c, v.id);
    next = b_.cast(next, type(c).dtype);
    if (type(next).shape != type(c).shape) next = b_.broadcast(next, type(c).shape);
    if (type(next) != type(c)) next = b_.cast(b_.reduce(OpKind::REDUCE_MAX, next, -1), type(c).dtype);
    bool inner_fuzzy = false;
    for (size_t i = outer; i < pool_.size(); ++i) inner_fuzzy = inner_fuzzy || pool_[i].fuzzy;
    pool_.resize(outer);  // values of the body do not escape it
    std::vector<ValueId> out = b_.for_end({next});
    DType d = type(out[0]).dtype;
    pool_.push_back({out[0], fz || inner_fuzzy || (is_float(d) && d != DType::f32)});
  }

  std::mt19937_64 rng_;
  Builder b_;
  int64_t size_ = 1;
  ValueId offs_ = kNoValue;
  std::vector<Val> pool_;
};

}  // namespace

GenProgram generate(uint64_t seed) { return Gen(seed).run(); }

}  // namespace metile::fuzz
