#include "bench_kernels.h"

#include "frontend/builder.h"

namespace metile::bench {

namespace {

ValueId i32(Builder& b, int64_t v) { return b.const_int(DType::i32, v); }
ValueId f32(Builder& b, double v) { return b.const_float(DType::f32, v); }
ValueId add(Builder& b, ValueId x, ValueId y) { return b.binary(OpKind::ADD, x, y); }
ValueId mul(Builder& b, ValueId x, ValueId y) { return b.binary(OpKind::MUL, x, y); }

}  // namespace

Program vector_add(int block) {
  Builder b("vector_add");
  ValueId x = b.param("x", Type::ptr(DType::f32)), y = b.param("y", Type::ptr(DType::f32));
  ValueId out = b.param("out", Type::ptr(DType::f32)), n = b.param("n", Type::scalar(DType::i32));
  ValueId offs = add(b, mul(b, b.grid(OpKind::PROGRAM_ID, 0), i32(b, block)), b.arange(kNoValue, block));
  ValueId mask = b.binary(OpKind::LT, offs, n);
  ValueId s = add(b, b.load(add(b, x, offs), mask, kNoValue), b.load(add(b, y, offs), mask, kNoValue));
  b.store(add(b, out, offs), s, mask);
  return b.finish();
}

Program softmax(int block) {
  Builder b("softmax");
  ValueId x = b.param("x", Type::ptr(DType::f32)), out = b.param("out", Type::ptr(DType::f32));
  ValueId cols = b.param("n_cols", Type::scalar(DType::i32));
  ValueId base = mul(b, b.grid(OpKind::PROGRAM_ID, 0), cols);
  ValueId offs = b.arange(kNoValue, block);
  ValueId mask = b.binary(OpKind::LT, offs, cols);
  ValueId at = add(b, base, offs);
  ValueId v = b.load(add(b, x, at), mask, f32(b, -1.0 / 0.0));
  ValueId m = b.reduce(OpKind::REDUCE_MAX, v, -1);
  ValueId e = b.unary(OpKind::EXP, b.binary(OpKind::SUB, v, m));
  ValueId s = b.reduce(OpKind::REDUCE_SUM, e, -1);
  b.store(add(b, out, at), b.binary(OpKind::DIV, e, s), mask);
  return b.finish();
}

Program layernorm(int block) {
  Builder b("layernorm");
  ValueId x = b.param("x", Type::ptr(DType::f32)), w = b.param("w", Type::ptr(DType::f32));
  ValueId bias = b.param("b", Type::ptr(DType::f32)), out = b.param("out", Type::ptr(DType::f32));
  ValueId cols = b.param("n_cols", Type::scalar(DType::i32));
  ValueId base = mul(b, b.grid(OpKind::PROGRAM_ID, 0), cols);
  ValueId offs = b.arange(kNoValue, block);
  ValueId mask = b.binary(OpKind::LT, offs, cols);
  ValueId at = add(b, base, offs);
  ValueId v = b.load(add(b, x, at), mask, kNoValue);
  ValueId n = b.cast(cols, DType::f32);
  ValueId mean = b.binary(OpKind::DIV, b.reduce(OpKind::REDUCE_SUM, v, -1), n);
  ValueId xc = b.select(mask, b.binary(OpKind::SUB, v, mean), f32(b, 0));
  ValueId var = b.binary(OpKind::DIV, b.reduce(OpKind::REDUCE_SUM, mul(b, xc, xc), -1), n);
  ValueId rstd = b.unary(OpKind::RSQRT, add(b, var, f32(b, 1e-5)));
  ValueId wv = b.load(add(b, w, offs), mask, kNoValue), bv = b.load(add(b, bias, offs), mask, kNoValue);
  b.store(add(b, out, at), add(b, mul(b, mul(b, xc, rstd), wv), bv), mask);
  return b.finish();
}

Program gemm(int bm, int bn, int bk) {
  Builder b("gemm");
  ValueId a = b.param("a", Type::ptr(DType::f32)), bb = b.param("b", Type::ptr(DType::f32));
  ValueId c = b.param("c", Type::ptr(DType::f32));
  ValueId m = b.param("M", Type::scalar(DType::i32)), n = b.param("N", Type::scalar(DType::i32));
  ValueId k = b.param("K", Type::scalar(DType::i32));
  ValueId row = mul(b, b.grid(OpKind::PROGRAM_ID, 0), i32(b, bm));
  ValueId col = mul(b, b.grid(OpKind::PROGRAM_ID, 1), i32(b, bn));
  ValueId acc = b.broadcast(f32(b, 0), Shape::of(bm, bn));
  auto [kk, carried] = b.for_begin(i32(b, 0), k, i32(b, bk), {acc});
  ValueId ta = b.tile_load(a, row, kk, k, Shape::of(bm, bk), m, k);
  ValueId tb = b.tile_load(bb, kk, col, n, Shape::of(bk, bn), k, n);
  std::vector<ValueId> r = b.for_end({b.dot(ta, tb, carried[0])});
  b.tile_store(c, row, col, n, r[0], m, n);
  return b.finish();
}

Program empty() {
  Builder b("empty");
  b.param("x", Type::ptr(DType::f32));
  return b.finish();
}

}  // namespace metile::bench
