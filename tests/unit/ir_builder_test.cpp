#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

Program vector_add() {
  Builder b("add");
  b.set_loc("add.py", 3);
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId y = b.param("Y", Type::ptr(DType::f32));
  ValueId out = b.param("Out", Type::ptr(DType::f32));
  ValueId n = b.param("N", Type::scalar(DType::i32));
  b.set_constexpr("BLOCK", "256");
  ValueId pid = b.grid(OpKind::PROGRAM_ID, 0);
  ValueId offs = b.binary(OpKind::ADD, b.binary(OpKind::MUL, pid, b.const_int(DType::i32, 256)),
                          b.arange(kNoValue, 256));
  ValueId mask = b.binary(OpKind::LT, offs, n);
  ValueId xv = b.load(b.binary(OpKind::ADD, x, offs), mask, kNoValue);
  ValueId yv = b.load(b.binary(OpKind::ADD, y, offs), mask, kNoValue);
  b.store(b.binary(OpKind::ADD, out, offs), b.binary(OpKind::ADD, xv, yv), mask);
  return b.finish();
}

TEST(Builder, VectorAddPrintsAndRoundTrips) {
  Program p = vector_add();
  std::string text = print(p);
  EXPECT_NE(text.find("kernel @add(%X: ptr<f32>"), std::string::npos) << text;
  EXPECT_NE(text.find("load"), std::string::npos);
  Program q = parse(text);
  EXPECT_EQ(print(q), text);
}

TEST(Builder, PromotionKeepsTileDtype) {
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f16));
  ValueId v = b.load(b.binary(OpKind::ADD, x, b.arange(kNoValue, 8)), kNoValue, kNoValue);
  ValueId r = b.binary(OpKind::MUL, b.const_float(DType::f32, 2.0), v);
  EXPECT_EQ(b.type(r).str(), "tile<8xf16>");
  ValueId i = b.binary(OpKind::MUL, b.arange(kNoValue, 8), b.const_float(DType::f32, 0.5));
  EXPECT_EQ(b.type(i).str(), "tile<8xf32>");
}

TEST(Builder, ShapeMismatchNamesLocation) {
  Builder b("k");
  b.set_loc("k.py", 7);
  ValueId a = b.arange(kNoValue, 8);
  ValueId c = b.arange(kNoValue, 16);
  try {
    b.binary(OpKind::ADD, a, c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_NE(std::string(e.what()).find("k.py:7"), std::string::npos) << e.what();
  }
}

// A value carried through a loop may meet T (the SIMT thread count, not fixed yet) on one side
// and a concrete size on the other: the first such match fixes T, a second size is an error.
TEST(Builder, LoopCarriedThreadTilesUnifyWithConcreteSizes) {
  Builder b("k");
  b.set_loc("k.py", 3);
  ValueId n = b.param("N", Type::scalar(DType::i32));
  ValueId init = b.broadcast(b.const_float(DType::f32, 0.0), Shape::of(kThreadsDim));
  EXPECT_EQ(b.type(init).str(), "tile<Txf32>");
  auto [iv, carried] = b.for_begin(b.const_int(DType::i32, 0), n, b.const_int(DType::i32, 1), {init});
  ValueId y = b.binary(OpKind::ADD, carried[0], b.cast(b.arange(kNoValue, 64), DType::f32));
  std::vector<ValueId> out = b.for_end({y});
  EXPECT_EQ(b.type(b.simt(OpKind::THREAD_ID)).str(), "tile<64xi32>");  // T is fixed now
  auto [iv2, c2] = b.for_begin(b.const_int(DType::i32, 0), n, b.const_int(DType::i32, 1), {out[0]});
  try {
    b.for_end({b.cast(b.arange(kNoValue, 32), DType::f32)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k.py:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("changes type"), std::string::npos) << e.what();
  }
  (void)iv;
  (void)iv2;
  (void)c2;
}

TEST(Builder, BroadcastToThreadsUsesTheFixedCount) {
  Builder b("k");
  b.set_num_threads(128);
  ValueId v = b.broadcast(b.const_float(DType::f32, 1.0), Shape::of(kThreadsDim));
  EXPECT_EQ(b.type(v).str(), "tile<128xf32>");
}

}  // namespace
}  // namespace metile
